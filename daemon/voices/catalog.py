"""Piper's voice catalogue (its voices.json format): what can be installed, and from where.

The catalogue is upstream data, not our config: keys it grows later are ignored, but every
entry must name its files with their sizes and digests, at safe relative paths in one folder,
so that an install can check each byte and move the voice into place in one rename.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from daemon.errors import VoiceError, VoiceInstallError
from daemon.validation import format_validation_error

MAX_CATALOG_BYTES = 50_000_000
TIMEOUT_S = 30.0


class CatalogError(VoiceInstallError):
    """The catalogue cannot be read, or an entry of it is not usable."""


class CatalogUnreachable(CatalogError):
    """The catalogue's location cannot be read (an offline box, a server down, no such file):
    what is on the box can still be listed."""


class _Upstream(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class Language(_Upstream):
    code: str = Field(min_length=2, max_length=16)
    family: str = Field(min_length=2, max_length=8)
    region: str = ""
    name_native: str = ""
    name_english: str = ""
    country_english: str = ""


class CatalogFile(_Upstream):
    size_bytes: int = Field(ge=0)
    md5_digest: str = Field(pattern=r"^[0-9a-fA-F]{32}$")


class CatalogEntry(_Upstream):
    key: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    name: str = ""
    language: Language
    quality: str = ""
    num_speakers: int = Field(1, ge=1, le=100_000)
    speaker_id_map: dict[str, int] = Field(default_factory=dict)
    files: dict[str, CatalogFile]
    aliases: list[str] = Field(default_factory=list)

    @field_validator("files")
    @classmethod
    def _files_of_one_folder(cls, files: dict[str, CatalogFile]) -> dict[str, CatalogFile]:
        folders = set()
        for path in files:
            pure = PurePosixPath(path)
            if pure.is_absolute() or ".." in pure.parts or "\\" in path or len(pure.parts) < 2:
                raise ValueError(f"{path!r} is not a relative path inside a voice folder")
            folders.add(pure.parent)
        if len(folders) > 1:
            raise ValueError(f"the files lie in {len(folders)} folders; one is expected")
        if not any(path.endswith(".onnx") for path in files):
            raise ValueError("no .onnx model among the files")
        if not any(path.endswith(".onnx.json") for path in files):
            raise ValueError("no .onnx.json voice config among the files")
        return files

    @property
    def folder(self) -> PurePosixPath:
        """The voice's folder in the catalogue (e.g. de/de_DE/thorsten/medium)."""
        return PurePosixPath(next(iter(self.files))).parent

    @property
    def model_file(self) -> str:
        return next(PurePosixPath(p).name for p in self.files if p.endswith(".onnx"))

    @property
    def config_file(self) -> str:
        return next(PurePosixPath(p).name for p in self.files if p.endswith(".onnx.json"))

    @property
    def size_bytes(self) -> int:
        return sum(file.size_bytes for file in self.files.values())

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.key,
            "language": self.language.code,
            "language_name": self.language.name_english,
            "quality": self.quality,
            "speakers": self.num_speakers,
            "size_bytes": self.size_bytes,
        }


def parse_catalog(data: Any, source: str) -> dict[str, CatalogEntry]:
    """Entries by key; CatalogError naming the entry and the key path of what is wrong."""
    if not isinstance(data, dict):
        raise CatalogError(f"{source}: a catalogue is a mapping of voice keys to entries")
    entries = {}
    for key, raw in data.items():
        try:
            entry = CatalogEntry.model_validate(raw)
        except ValidationError as error:
            raise CatalogError(
                f"{source}: entry {key!r}:\n{format_validation_error(error)}"
            ) from None
        if entry.key != key:
            raise CatalogError(f"{source}: entry {key!r} says its key is {entry.key!r}")
        entries[key] = entry
    return entries


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://", "file://"))


def read_bytes(location: str, limit: int = MAX_CATALOG_BYTES) -> bytes:
    """A small document from a URL or a local path; CatalogError saying what failed."""
    import urllib.error
    import urllib.request

    try:
        if is_url(location):
            with urllib.request.urlopen(location, timeout=TIMEOUT_S) as response:
                data = response.read(limit + 1)
        else:
            with Path(location).open("rb") as handle:
                data = handle.read(limit + 1)
    except urllib.error.HTTPError as error:
        raise CatalogUnreachable(f"{location}: HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        raise CatalogUnreachable(f"{location}: cannot connect ({error.reason})") from None
    except OSError as error:
        raise CatalogUnreachable(f"{location}: cannot read ({error.strerror or error})") from None
    if len(data) > limit:
        raise CatalogError(f"{location}: larger than {limit} bytes")
    return data


def read_catalog(location: str) -> dict[str, CatalogEntry]:
    data = read_bytes(location)
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CatalogError(f"{location}: not a JSON catalogue ({error})") from None
    return parse_catalog(document, location)


def find(entries: dict[str, CatalogEntry], name: str) -> CatalogEntry:
    """The entry named by key or alias; VoiceError naming the close matches when none is."""
    if name in entries:
        return entries[name]
    for entry in entries.values():
        if name in entry.aliases:
            return entry
    close = difflib.get_close_matches(name, list(entries), n=3, cutoff=0.6)
    hint = (
        f"; did you mean {', '.join(close)}?" if close else "; `fastvoice voices list` lists them"
    )
    raise VoiceError(f"voice {name!r} is not in the catalogue{hint}")


def file_location(base: str, path: str) -> str:
    """Where a catalogue file lies: under a base URL, or under a local folder (--from DIR)."""
    if is_url(base):
        import urllib.request

        return base.rstrip("/") + "/" + urllib.request.pathname2url(path).lstrip("/")
    return str(Path(base) / path)
