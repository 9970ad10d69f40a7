"""Finding and checking on-device artifacts (written by edge_build) before a backend loads one.

An artifact belongs to one source model, one onnxruntime version, one set of build options and
one machine. Its directory name is a key over all of these, so a changed source, an upgraded
library or a copied disk simply finds no artifact and falls back to the source model; nothing
stale or foreign is ever loaded. The cheap checks (sizes, manifest fields) run at every lookup;
the service (and `fastvoice build --verify`) also checks the sha256 of every file, once per
process and file version, so a corrupted artifact is never loaded by a box that runs for months.
One-shot `fastvoice say` keeps to the cheap checks: hashing the weights would cost it about a
third of its start.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.files import systemd_or_user_dir

MANIFEST = "manifest.json"
FORMAT = 1


def cache_root() -> Path:
    """systemd's CacheDirectory when run by it, else the user's cache directory."""
    return systemd_or_user_dir("CACHE_DIRECTORY", "XDG_CACHE_HOME", ".cache")


def default_store() -> Path:
    return cache_root() / "artifacts"


def machine_id() -> dict[str, str]:
    """What an optimised CPU graph depends on: architecture and CPU model."""
    return {"arch": platform.machine(), "cpu": _cpu_model() or platform.processor()}


@functools.cache
def _cpu_model() -> str:
    """Read once per process: every artifact lookup keys on it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def source_identity(source: Path) -> dict[str, Any]:
    stat = source.stat()
    return {"path": str(source.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def artifact_key(
    source: Path,
    kind: str,
    options: dict[str, Any],
    library: str,
    machine: dict[str, str] | None = None,
) -> str:
    """`machine`: what the artifact runs on (default: this CPU; a GPU's name and compute
    capability for an engine)."""
    identity = {
        "source": source_identity(source),
        "kind": kind,
        "options": options,
        "library": library,
        "machine": machine or machine_id(),
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    directory: Path
    manifest: dict[str, Any]

    @property
    def model(self) -> Path:
        return self.directory / self.manifest["files"]["model"]["name"]

    def verify(self) -> list[str]:
        """Problems found by checking every file's sha256 (empty when intact)."""
        problems = []
        for role, entry in self.manifest["files"].items():
            path = self.directory / entry["name"]
            if not path.is_file():
                problems.append(f"{role} file {path} is missing")
            elif not _matches(path, entry["sha256"]):
                problems.append(f"{role} file {path} does not match its sha256")
        return problems


FileVersion = tuple[str, int, int, int, str]  # path, inode, size, mtime, expected sha256
_intact: set[FileVersion] = set()


def verified_files() -> set[FileVersion]:
    """The file versions this process found intact (handed to another one by trust_verified)."""
    return set(_intact)


def trust_verified(versions: set[FileVersion]) -> None:
    """Versions another process (the service's build child) has just hashed: not hashed again
    unless the file has changed since."""
    _intact.update(versions)


def _matches(path: Path, sha256: str) -> bool:
    """sha256_file(path) == sha256, remembered for this version of the file (a rewrite gets a
    new inode or mtime): a voice looks each artifact up more than once while it loads."""
    stat = path.stat()
    version = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, sha256)
    if version in _intact:
        return True
    if sha256_file(path) != sha256:
        return False
    _intact.add(version)
    return True


def find_artifact(
    store: Path,
    source: Path,
    kind: str,
    options: dict[str, Any],
    library: str,
    verify: bool = False,
    machine: dict[str, str] | None = None,
) -> tuple[Artifact | None, str]:
    """The artifact for exactly this source, options, library and machine, with a reason;
    `verify` also checks every file's sha256."""
    directory = store / artifact_key(source, kind, options, library, machine)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        return None, f"no artifact for {source.name}: run `fastvoice build`"
    except (OSError, ValueError) as error:
        return None, f"artifact {directory} has an unreadable manifest ({error}); rebuild it"
    for role, entry in manifest.get("files", {}).items():
        path = directory / entry["name"]
        if not path.is_file() or path.stat().st_size != entry["size"]:
            return None, f"artifact {directory}: {role} file is missing or truncated; rebuild it"
    artifact = Artifact(directory, manifest)
    problems = artifact.verify() if verify else []
    if problems:
        return None, f"{problems[0]}; not used, rebuild it with `fastvoice build`"
    return artifact, f"artifact {directory.name}"


def source_record(source: Path) -> dict[str, Any]:
    """The manifest's `source`: what the key was made from, and its sha256."""
    return {**source_identity(source), "sha256": sha256_file(source)}


def utc_now() -> str:
    """A manifest's `created`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_build_directory(store: Path) -> Path:
    """A temporary directory in the store to build an artifact in (same file system: the
    final rename is atomic)."""
    store.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".build-", dir=store))


def install(work: Path, directory: Path, manifest: dict[str, Any]) -> Artifact:
    """Manifest last, then one rename: readers see the whole artifact or none."""
    (work / MANIFEST).write_text(json.dumps(manifest, indent=2))
    for path in work.iterdir():
        os.chmod(path, 0o644)
    os.chmod(work, 0o755)
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(work, directory)
    return Artifact(directory, manifest)


def file_entries(work: Path, roles: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The manifest's `files`: name, size and sha256 of each role's file in `work`."""
    return {
        role: {
            "name": name,
            "size": (work / name).stat().st_size,
            "sha256": sha256_file(work / name),
        }
        for role, name in roles.items()
    }
