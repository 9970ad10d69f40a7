"""The config in force, and which of its keys a reload (SIGHUP) can change.

Every part that reads a reloadable setting keeps this holder and reads its section when it uses
it, never a copy taken at start: a reload swaps one object and reaches them all. Parts with state
of their own that a setting seeds (the player's device and volume, the default voice, the queue's
length, the cache's size) get the new values through the service's reload step. A restart-only
key that changed in the file keeps its running value and is listed in `restart_needed`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from daemon.config import Config
from daemon.voices.installed import installed_names

RELOADABLE = frozenset(
    {
        "voice",
        "catalog.url",
        "catalog.files_url",
        "catalog.dir",
        "text.max_chars",
        "text.max_sentence_chars",
        "text.normalize",
        "text.ssml_max_depth",
        "text.lexicon.file",
        "text.lexicon.words",
        "text.lexicon.voices",
        "audio.device",
        "audio.file_dir",
        "audio.volume",
        "audio.sentence_pause_s",
        "audio.fade_ms",
        "audio.lead_in_ms",
        "audio.tail_ms",
        "audio.keep_awake_s",
        "audio.keep_awake_tone_dbfs",
        "audio.sample_rate",
        "audio.prefill_s",
        "sounds.dir",
        "sounds.chime_by_priority",
        "time_zone",
        "quiet_hours",
        "schedules",
        "cache.max_mb",
        "queue.max_jobs",
        "queue.max_payload_bytes",
        "queue.resume_interrupted",
        "queue.sync_lead_s",
        "queue.sync_late_policy",
        "queue.stall_limit_s",
        "mqtt.stats_interval_s",
        "mqtt.reply_topic_prefixes",
        "mqtt.publish_format",
        "mqtt.publish_sample_rate",
        "wyoming.stream_idle_s",
        "http.stream_idle_s",
        "hermes.site_id",
        "hermes.any_site",
        "hermes.remote_playback",
        "hermes.play_finished_timeout_s",
        "http.voice_aliases",
    }
)
# What the service is built from: loaded voices and backends, open connections and files,
# listening sockets, subscriptions and Home Assistant's entities.
RESTART_ONLY = frozenset(
    {
        "version",
        "voices",
        "runtime.backend",
        "runtime.threads",
        "runtime.workers",
        "runtime.precision",
        "runtime.artifacts",
        "runtime.build_on_start",
        "runtime.artifact_dir",
        "gpu.device",
        "gpu.vram_budget_mb",
        "gpu.cuda_context_mb",
        "gpu.precision",
        "gpu.max_batch",
        "gpu.profiles",
        "gpu.profile_levels",
        "gpu.builder_optimization_level",
        "gpu.workspace_fraction",
        "audio.media_role",
        "cache.enabled",
        "cache.dir",
        "cache.pregenerate",
        "queue.persist",
        "queue.journal_dir",
        "mqtt.host",
        "mqtt.port",
        "mqtt.username",
        "mqtt.password_file",
        "mqtt.password_env",
        "mqtt.client_id",
        "mqtt.render_group",
        "mqtt.base_topic",
        "mqtt.fleet_topic",
        "mqtt.zones",
        "mqtt.qos",
        "mqtt.keepalive_s",
        "mqtt.tls",
        "homeassistant.discovery",
        "homeassistant.prefix",
        "homeassistant.node_id",
        "hermes.enabled",
        "wyoming.uri",
        "http.listen",
        "http.token_file",
        "http.token_env",
        "http.require_token_for_reads",
        "http.max_body_bytes",
        "http.cors_origins",
        "local.socket",
    }
)


def leaf_keys(model: type[BaseModel] = Config, prefix: str = "") -> set[str]:
    """Every key path of the config down to its values (a mapping or list is one value)."""
    keys = set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= leaf_keys(annotation, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def value_at(config: BaseModel, key: str) -> Any:
    value: Any = config
    for name in key.split("."):
        value = getattr(value, name)
    return value


def replaced(config: BaseModel, key: str, value: Any) -> Any:
    """A copy of `config` with the value at `key` replaced (values already validated)."""
    head, _, rest = key.partition(".")
    new = replaced(getattr(config, head), rest, value) if rest else value
    return config.model_copy(update={head: new})


def changed_keys(old: Config, new: Config) -> list[str]:
    return sorted(key for key in leaf_keys() if value_at(old, key) != value_at(new, key))


@dataclass(frozen=True)
class ReloadReport:
    time: float
    changed: list[str]
    restart_needed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"time": round(self.time, 3), "changed": self.changed}


@dataclass(frozen=True)
class ReloadAttempt:
    """The last SIGHUP's outcome: a refused one changes nothing, so only this tells an operator
    (in status/info, /api/status) that the file on disk is not the config in force."""

    time: float
    outcome: Literal["applied", "refused"]
    error: str | None = None  # why it was refused: the bad key and value

    def as_dict(self) -> dict[str, Any]:
        return {"time": round(self.time, 3), "outcome": self.outcome, "error": self.error}


class Settings:
    """The config in force (`config`), as it was at start for restart-only keys."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.started = config
        self.last_reload: ReloadReport | None = None
        self.last_reload_attempt: ReloadAttempt | None = None
        self._lock = threading.Lock()

    def reload(self, loaded: Config) -> ReloadReport:
        """Takes the reloadable keys of `loaded`; the restart-only ones it changes are listed."""
        with self._lock:
            restart_needed = [k for k in changed_keys(self.started, loaded) if k in RESTART_ONLY]
            in_force = loaded
            for key in restart_needed:
                in_force = replaced(in_force, key, value_at(self.started, key))
            known = set(in_force.voices) | installed_names(in_force.catalog.dir)
            if in_force.voice not in known:  # a voice the running service has not
                restart_needed.append("voice")
                in_force = replaced(in_force, "voice", self.config.voice)
            changed = changed_keys(self.config, in_force)
            self.config = in_force
            self.last_reload = ReloadReport(time.time(), changed, restart_needed)
            self.last_reload_attempt = ReloadAttempt(self.last_reload.time, "applied")
            return self.last_reload

    def refuse_reload(self, error: str) -> None:
        """A reload whose file could not be read or validated: the config in force stays."""
        with self._lock:
            self.last_reload_attempt = ReloadAttempt(time.time(), "refused", error)

    @property
    def restart_needed(self) -> list[str]:
        return self.last_reload.restart_needed if self.last_reload is not None else []
