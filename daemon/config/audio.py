"""`audio` and `sounds`: the output device and how sentences join, and the chimes. Whether a
chime's file is there is one of the config's file checks (daemon.admin.config_checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from daemon.config.base import Reloadable, RestartOnly, SoundName, StrictModel, resolve_path

NO_DEVICE = "none"


class AudioConfig(StrictModel):
    device: Reloadable[str | int | None] = Field(
        None,
        description="output device name or index; none: no sound card (played jobs go to "
        "file_dir only)",
    )
    file_dir: Reloadable[Path | None] = Field(
        None,
        description="each played job also written here as <job id>.wav (a PA system that "
        "plays files, an archive, a box without a sound card)",
    )
    volume: Reloadable[float] = Field(1.0, ge=0.0, le=1.0)
    sentence_pause_s: Reloadable[float] = Field(
        0.2, ge=0.0, le=5.0, description="silence between sentences"
    )
    fade_ms: Reloadable[float] = Field(
        4.0, ge=0.0, le=50.0, description="fade at sentence edges (no clicks)"
    )
    lead_in_ms: Reloadable[int] = Field(
        0,
        ge=0,
        le=5000,
        description="silence played before each job, for an amplifier that wakes late and "
        "would swallow the first word",
    )
    tail_ms: Reloadable[int] = Field(
        0, ge=0, le=5000, description="silence played after each job, for one that cuts the end"
    )
    keep_awake_s: Reloadable[float] = Field(
        0.0,
        ge=0.0,
        le=3600.0,
        description="hold the output open this long after each job, for an amplifier that "
        "sleeps between announcements and wakes late (the next job also starts without "
        "opening the device)",
    )
    keep_awake_tone_dbfs: Reloadable[float | None] = Field(
        None,
        ge=-90.0,
        le=-20.0,
        description="while the output is held open, a 20 Hz tone at this level instead of "
        "silence, for an amplifier whose auto-standby listens for a signal; null: silence",
    )
    sample_rate: Reloadable[int | None] = Field(
        None, ge=8000, le=192_000, description="resample to this rate (default: the voice's)"
    )
    prefill_s: Reloadable[float] = Field(
        0.1, ge=0.0, le=600.0, description="audio buffered before playback starts"
    )
    media_role: RestartOnly[Literal["announce", "event", "phone", "notification"] | None] = Field(
        "announce",
        description="media.role of the playback streams on PulseAudio or PipeWire, whose "
        "role-ducking lowers music while fastvoice speaks; null: none",
    )

    _resolve = field_validator("file_dir")(resolve_path)

    @model_validator(mode="after")
    def _somewhere_to_play(self) -> AudioConfig:
        if self.device == NO_DEVICE and self.file_dir is None:
            raise ValueError(
                "device: none plays nothing; set audio.file_dir to write each job there"
            )
        return self


# Reloadable, every key: marked where Config declares `sounds`.
class SoundsConfig(StrictModel):
    dir: Path | None = Field(
        None, description="WAV, FLAC or OGG files, each a sound named by its file name's stem"
    )
    chime_by_priority: dict[
        Literal["low", "normal", "high", "critical"],
        SoundName,
    ] = Field(
        default_factory=dict,
        description="the sound before a job of this priority whose say names no chime "
        "(built-in: dingdong, attention, alarm; default: none)",
    )

    _resolve = field_validator("dir")(resolve_path)

    def chime_for(self, chime: str | None, priority: str) -> str:
        """The chime a job plays: its own, else its priority's, else none."""
        return chime or self.chime_by_priority.get(priority, "none")
