"""What every section of the config shares: strict models, names, and paths resolved against
the directory of the file they are written in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo

DEFAULT_VOICE = "en_US-joe-medium"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
VoiceName = Annotated[str, Field(pattern=NAME_PATTERN)]
SoundName = Annotated[str, Field(pattern=NAME_PATTERN)]
TopicLevel = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


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
