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

from daemon.config import Config, Reload, reload_marks
from daemon.voices.installed import installed_names


def key_marks(
    model: type[BaseModel] = Config, prefix: str = "", above: tuple[Reload, ...] = ()
) -> dict[str, tuple[Reload, ...]]:
    """Every key path of the config down to its values (a mapping or list is one value), with
    the reload marks on its way: its sections' and its own (daemon.config.base.Reload)."""
    keys: dict[str, tuple[Reload, ...]] = {}
    for name, info in model.model_fields.items():
        marks = (*above, *reload_marks(info))
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= key_marks(annotation, f"{prefix}{name}.", marks)
        else:
            keys[f"{prefix}{name}"] = marks
    return keys


def leaf_keys(model: type[BaseModel] = Config, prefix: str = "") -> set[str]:
    """Every key path of the config down to its values (a mapping or list is one value)."""
    return set(key_marks(model, prefix))


def _marked(kind: Reload) -> frozenset[str]:
    return frozenset(key for key, marks in key_marks().items() if marks == (kind,))


# The keys a reload takes at once, and those it keeps at their running value: what the service
# is built from (loaded voices and backends, open connections and files, listening sockets,
# subscriptions and Home Assistant's entities). Each key is marked where the config models
# declare it; a key marked neither way, or twice, is in neither set (and kept until a restart).
RELOADABLE = _marked(Reload.RELOADABLE)
RESTART_ONLY = _marked(Reload.RESTART_ONLY)


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
            from_file = changed_keys(self.started, loaded)
            restart_needed = [key for key in from_file if key not in RELOADABLE]
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
