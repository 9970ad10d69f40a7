"""Finding and checking on-device artifacts (written by edge_build) before a backend loads one.

An artifact belongs to one source model, one onnxruntime version, one set of build options and
one machine. Its directory name is a key over all of these, so a changed source, an upgraded
library or a copied disk simply finds no artifact and falls back to the source model; nothing
stale or foreign is ever loaded. Every lookup, in the service and in one-shot `fastvoice say`
alike, checks each file's size and fast checksum (xxh3-128: about 11 ms for the embedded voice's
63 MB, where sha256 would take a third of `say`'s start), once per process and file version, so
a damaged artifact is never loaded: it is reported and the source model is used instead.
`fastvoice build --verify` also checks the sha256 that the manifest records beside it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from daemon.box.files import systemd_or_user_dir

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# 2: each file's fast checksum beside its sha256; 3: a VITS encoder's durations; 4: a VITS
# decoder's upsampling in polyphase form
FORMAT = 4
FAST_HASH = "xxh3_128"


def cache_root() -> Path:
    """systemd's CacheDirectory when run by it, else the user's cache directory."""
    return systemd_or_user_dir("CACHE_DIRECTORY", "XDG_CACHE_HOME", ".cache")


def default_store() -> Path:
    return cache_root() / "artifacts"


def machine_id() -> dict[str, str]:
    """What an optimised CPU graph depends on: architecture and CPU model."""
    return {"arch": platform.machine(), "cpu": _cpu_model() or platform.processor()}


# The instruction sets ONNX Runtime's CPU kernels choose between (int8 dot products, bf16, AMX,
# ARM's fp16 and dot products): what a precision's speed on this box depends on.
KERNEL_FEATURES = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "asimd",
    "asimdhp",
    "asimddp",
)


@functools.cache
def cpu_features() -> tuple[str, ...]:
    """Which of KERNEL_FEATURES this CPU has."""
    try:
        return features_in(Path("/proc/cpuinfo").read_text())
    except OSError:
        return ()


def features_in(cpuinfo: str) -> tuple[str, ...]:
    """Which of KERNEL_FEATURES a /proc/cpuinfo lists (x86's `flags`, ARM's `Features`)."""
    lines = cpuinfo.splitlines()
    flags = next(
        (line.split(":", 1)[1].split() for line in lines if line.startswith(("flags", "Features"))),
        [],
    )
    return tuple(feature for feature in KERNEL_FEATURES if feature in flags)


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
    return _digest(path, hashlib.sha256())


def fast_hash_file(path: Path) -> str:
    """The checksum checked at every load: it finds damage, not tampering (that is sha256's)."""
    return _digest(path, xxhash.xxh3_128())


def _digest(path: Path, digest) -> str:
    """Read into one reused buffer: a new bytes object per block costs a third of the time."""
    block = bytearray(1 << 20)
    view = memoryview(block)
    with path.open("rb", buffering=0) as handle:
        while size := handle.readinto(block):
            digest.update(view[:size])
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    directory: Path
    manifest: dict[str, Any]

    @property
    def model(self) -> Path:
        return self.directory / self.manifest["files"]["model"]["name"]

    def verify(self, sha256: bool = False) -> list[str]:
        """Problems found by checking every file's fast checksum, and with `sha256` its sha256
        (empty when intact)."""
        problems = []
        for role, entry in self.manifest["files"].items():
            path = self.directory / entry["name"]
            if not path.is_file():
                problems.append(f"{role} file {path} is missing")
            elif FAST_HASH not in entry:
                problems.append(f"{role} file {path} has no {FAST_HASH} in the manifest")
            elif not intact(path, FAST_HASH, entry[FAST_HASH]):
                problems.append(f"{role} file {path} is damaged (its {FAST_HASH} differs)")
            elif sha256 and not intact(path, "sha256", entry["sha256"]):
                problems.append(f"{role} file {path} does not match its sha256")
        return problems


FileVersion = tuple[str, int, int, int, str, str]  # path, inode, size, mtime, algorithm, digest
_found_intact: set[FileVersion] = set()
_reported: set[str] = set()  # a voice looks a damaged artifact up several times: one warning
_HASHERS = {FAST_HASH: fast_hash_file, "sha256": sha256_file}


def intact(path: Path, algorithm: str, expected: str) -> bool:
    """Whether the file's digest is `expected`, remembered for this version of the file (a
    rewrite gets a new inode or mtime): a voice looks each artifact up more than once."""
    stat = path.stat()
    version = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, algorithm, expected)
    if version in _found_intact:
        return True
    if _HASHERS[algorithm](path) != expected:
        return False
    _found_intact.add(version)
    return True


def find_artifact(
    store: Path,
    source: Path,
    kind: str,
    options: dict[str, Any],
    library: str,
    machine: dict[str, str] | None = None,
    sha256: bool = False,
) -> tuple[Artifact | None, str]:
    """The intact artifact for exactly this source, options, library and machine, with a
    reason; `sha256` also checks every file's sha256. A damaged one is logged as a warning (the
    one line a `fastvoice say` user sees) and not returned."""
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
    problems = artifact.verify(sha256)
    if problems:
        reason = f"{problems[0]}; not used, rebuild it with `fastvoice build`"
        if reason not in _reported:
            _reported.add(reason)
            log.warning("%s", reason)
        return None, reason
    return artifact, f"artifact {directory.name}"
