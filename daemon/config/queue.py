"""`cache` and `queue`: the phrase cache and the job queue (limits, journal, synchronised
starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from daemon.config.base import Reloadable, RestartOnly, StrictModel, VoiceName, resolve_path


class PregenerateItem(StrictModel):
    text: str = Field(min_length=1)
    voice: VoiceName | None = None
    speaker: str | int | None = None


class CacheConfig(StrictModel):
    enabled: RestartOnly[bool] = Field(True, description="keep rendered phrases on disk")
    dir: RestartOnly[Path | None] = Field(
        None, description="default: systemd's CacheDirectory or ~/.cache"
    )
    max_mb: Reloadable[float] = Field(
        200.0, gt=0, le=100_000, description="least recently used go first"
    )
    pregenerate: RestartOnly[list[PregenerateItem]] = Field(
        default_factory=list, description="phrases rendered at start, e.g. fixed announcements"
    )

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1_000_000)

    _resolve = field_validator("dir")(resolve_path)


class QueueConfig(StrictModel):
    max_jobs: Reloadable[int] = Field(
        50, ge=1, le=10_000, description="queued jobs beyond this are rejected"
    )
    max_payload_bytes: Reloadable[int] = Field(
        65_536, ge=1024, le=16_777_216, description="larger MQTT commands are refused unread"
    )
    resume_interrupted: Reloadable[bool] = Field(
        False, description="replay a job cut off by a critical one, from its start"
    )
    persist: RestartOnly[bool] = Field(
        True, description="keep accepted jobs on disk until they end, to replay after a crash"
    )
    journal_dir: RestartOnly[Path | None] = Field(
        None, description="where; default: systemd's StateDirectory or ~/.local/state"
    )
    stall_limit_s: Reloadable[float] = Field(
        60.0,
        ge=1.0,
        le=3600.0,
        description="a job making no progress this long stops the watchdog pings: systemd "
        "restarts the service",
    )
    sync_lead_s: Reloadable[float] = Field(
        3.0,
        ge=0.1,
        le=60.0,
        description="a `sync` say (and `send --zone`) starts this long after it is sent: the "
        "player opens its stream 2.5 s ahead of the instant, after rendering",
    )
    sync_late_policy: Reloadable[Literal["play", "drop"]] = Field(
        "play", description="a job that cannot start at its `at`: play at once, or drop it"
    )

    _resolve = field_validator("journal_dir")(resolve_path)
