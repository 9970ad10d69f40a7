"""Writing an artifact, the one way every builder does it: a work directory in the store, the
files, a manifest naming each file's size and checksums, then one rename into place. Readers
(daemon.runtime.artifacts) see the whole artifact or none; a failure leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.runtime.artifacts import (
    FAST_HASH,
    FORMAT,
    MANIFEST,
    Artifact,
    fast_hash_file,
    sha256_file,
    source_identity,
)

# Writes the files into the work directory; returns {role: file name} and manifest fields
# learnt while writing them (timings, what a builder reported).
FileWriter = Callable[[Path], tuple[dict[str, str], dict[str, Any]]]


@dataclass(frozen=True)
class BuildResult:
    """One line of `fastvoice build`'s report: `stage` names the voice's artifact."""

    voice: str
    stage: str
    status: str
    directory: Path
    seconds: float

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")


def write_artifact(
    store: Path, directory: Path, manifest: dict[str, Any], write_files: FileWriter
) -> Artifact:
    """The artifact at `directory` (replacing what is there), its manifest `manifest` plus the
    format, the creation time and the files' entries."""
    store.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=store))  # same file system: atomic rename
    try:
        roles, learnt = write_files(work)
        full = {
            "format": FORMAT,
            **manifest,
            **learnt,
            "created": utc_now(),
            "files": file_entries(work, roles),
        }
        (work / MANIFEST).write_text(json.dumps(full, indent=2))  # last: it marks completion
        for path in work.iterdir():
            os.chmod(path, 0o644)
        os.chmod(work, 0o755)
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(work, directory)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Artifact(directory, full)


def file_entries(work: Path, roles: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The manifest's `files`: name, size, sha256 and fast checksum of each role's file."""
    return {
        role: {
            "name": name,
            "size": (work / name).stat().st_size,
            "sha256": sha256_file(work / name),
            FAST_HASH: fast_hash_file(work / name),
        }
        for role, name in roles.items()
    }


def source_record(source: Path) -> dict[str, Any]:
    """The manifest's `source`: what the key was made from, and its sha256."""
    return {**source_identity(source), "sha256": sha256_file(source)}


def utc_now() -> str:
    """A manifest's `created`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
