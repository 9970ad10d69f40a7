"""What every section of the config shares: strict models, names, paths resolved against the
directory of the file they are written in, and the marks that say what a reload may change."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo
from pydantic.fields import FieldInfo

DEFAULT_VOICE = "en_US-joe-medium"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
VoiceName = Annotated[str, Field(pattern=NAME_PATTERN)]
SoundName = Annotated[str, Field(pattern=NAME_PATTERN)]
TopicLevel = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class Reload(Enum):
    """What a running service does with a key changed in the file at a reload (SIGHUP)."""

    RELOADABLE = "reloadable"  # taken at once (daemon.service.settings)
    RESTART_ONLY = "restart-only"  # keeps its running value until a restart, said in status


_T = TypeVar("_T")
# Every key of the file is marked where it is declared, `voice: Reloadable[VoiceName] = ...`; a
# section whose keys are all of one kind is marked once, where Config declares it, and each key
# of a mixed section is marked itself. daemon.service.settings reads the marks.
Reloadable = Annotated[_T, Reload.RELOADABLE]
RestartOnly = Annotated[_T, Reload.RESTART_ONLY]


def reload_marks(info: FieldInfo) -> list[Reload]:
    """The marks on one field (on a section: for each of its keys not marked itself)."""
    return [item for item in info.metadata if isinstance(item, Reload)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, defer_build=True)


def resolve_path(value: Path | None, info: ValidationInfo) -> Path | None:
    if value is None:
        return None
    value = value.expanduser()
    base_dir = (info.context or {}).get("base_dir")
    if not value.is_absolute() and base_dir is not None:
        value = Path(base_dir) / value
    return value
