"""The voices installed on this box: a directory laid out like Piper's catalogue.

Each voice has its catalogue folder (e.g. `de/de_DE/thorsten/medium/`) holding its files and
`voice.json` (its catalogue entry, where it came from, when). A folder without `voice.json` is
not a voice: an install (daemon.voices.install) fills `.staging/KEY/` and renames the whole
folder into place, so a voice appears whole or not at all. `voices.json` at the top lists the
installed entries in the catalogue's own format, so the directory of one box is a mirror that
another installs from (`fastvoice voices install --from DIR`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.box.files import replaced_atomically, state_root
from daemon.voices.bundled import installed_bundled
from daemon.voices.catalog import CatalogEntry

log = logging.getLogger(__name__)

RECORD = "voice.json"
INDEX = "voices.json"
STAGING = ".staging"


def voices_dir(configured: Path | None) -> Path:
    """`catalog.dir`, else systemd's StateDirectory or the user's state directory."""
    if configured is not None:
        return configured
    return state_root() / "voices"


@dataclass(frozen=True)
class InstalledVoice:
    entry: CatalogEntry
    folder: Path
    source: str
    installed_at: float

    @property
    def name(self) -> str:
        return self.entry.key

    @property
    def model(self) -> Path:
        return self.folder / self.entry.model_file

    @property
    def config_file(self) -> Path:
        return self.folder / self.entry.config_file

    def describe(self) -> dict[str, Any]:
        return {
            **self.entry.summary(),
            "folder": str(self.folder),
            "source": self.source,
            "installed_at": round(self.installed_at, 3),
        }


def installed(root: Path) -> dict[str, InstalledVoice]:
    """The installed voices by name; a folder whose record is unreadable is skipped, logged."""
    found: dict[str, InstalledVoice] = {}
    if not root.is_dir():
        return found
    for record in sorted(root.glob(f"*/*/*/*/{RECORD}")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            entry = CatalogEntry.model_validate(data["entry"])
            voice = InstalledVoice(entry, record.parent, str(data["source"]), float(data["time"]))
        except (OSError, ValueError, KeyError, TypeError, ValidationError) as error:
            log.warning("%s: not a usable voice record (%s); skipped", record, error)
            continue
        if voice.folder.relative_to(root).as_posix() != entry.folder.as_posix():
            log.warning("%s: not at its catalogue folder %s; skipped", record, entry.folder)
            continue
        found[voice.name] = voice
    return found


def installed_names(configured_dir: Path | None) -> set[str]:
    """Every installed voice, from the catalogue or bundled with an extra: any may be the
    default voice."""
    root = voices_dir(configured_dir)
    return set(installed(root)) | set(installed_bundled(root))


def write_index(root: Path) -> None:
    """voices.json: the installed entries, in the catalogue's format."""
    entries = {name: voice.entry.model_dump(mode="json") for name, voice in installed(root).items()}
    with replaced_atomically(root / INDEX) as out:
        out.write(json.dumps(entries, indent=2, ensure_ascii=False).encode())
