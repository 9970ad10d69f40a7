"""One catalogue file fetched to disk and checked: resumed after a cut, its size and md5 digest
verified before anyone may use it.

The bytes go to `NAME.part` beside the target; only a file of the right size and digest is
renamed to its name. A cut connection leaves the part for the next try to resume (HTTP Range);
a wrong digest removes it, so a damaged file is fetched whole again, never used.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from daemon.errors import VoiceInstallError
from daemon.voices.catalog import CatalogFile, is_url

BLOCK = 1 << 20
TIMEOUT_S = 30.0
ATTEMPTS = 3  # a cut mid-file is resumed this many times before the install gives up
Progress = Callable[[int], None]  # bytes just added


class DownloadError(VoiceInstallError):
    """A file could not be fetched whole and intact; the message says which and why."""


def fetch(location: str, target: Path, expected: CatalogFile, progress: Progress) -> None:
    """`location` (a URL or a local path) to `target`, checked against `expected`."""
    part = target.with_name(target.name + ".part")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            if is_url(location) and not location.startswith("file://"):
                _http_into(location, part, expected.size_bytes, progress)
            else:
                _copy_into(_local_path(location), part, progress)
        except _Cut as cut:
            if attempt == ATTEMPTS:
                raise DownloadError(
                    f"{location}: cut off after {cut.have} of {expected.size_bytes} bytes "
                    f"({ATTEMPTS} tries); run the install again to resume"
                ) from None
            continue
        break
    _check(location, part, expected)
    os.replace(part, target)


class _Cut(Exception):
    def __init__(self, have: int) -> None:
        self.have = have


def _local_path(location: str) -> Path:
    return Path(urllib.request.url2pathname(location.removeprefix("file://")))


def _http_into(url: str, part: Path, size: int, progress: Progress) -> None:
    have = part.stat().st_size if part.exists() else 0
    if have > size:  # longer than the catalogue says: not a part of this file
        part.unlink()
        have = 0
    if have == size:
        return
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # the part is whole already; the digest decides
            return
        raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or error
        raise DownloadError(f"{url}: cannot connect ({reason})") from None
    with response:
        if have and response.status != 206:  # the server ignores ranges: start again
            have = 0
        mode = "ab" if have else "wb"
        if have:
            progress(have)
        with _writing(part, mode) as out:
            while have <= size and (block := _read(response)):
                out.write(block)
                have += len(block)
                progress(len(block))
    if have < size:
        raise _Cut(have)


def _read(response) -> bytes:
    """The next block; empty at the end or at a cut (what arrived stays in the part, and the
    next try resumes it)."""
    try:
        return response.read(BLOCK)
    except (OSError, urllib.error.URLError, http.client.HTTPException):
        return b""


def _copy_into(source: Path, part: Path, progress: Progress) -> None:
    try:
        handle = source.open("rb")
    except OSError as error:
        raise DownloadError(f"{source}: cannot read ({error.strerror or error})") from None
    with handle, _writing(part, "wb") as out:
        while block := handle.read(BLOCK):
            out.write(block)
            progress(len(block))


class _writing:
    """A part file opened for writing, whose ENOSPC/EDQUOT becomes a message with the folder."""

    def __init__(self, path: Path, mode: str) -> None:
        self.path, self.mode = path, mode

    def __enter__(self):
        self.handle = self.path.open(self.mode)
        return self.handle

    def __exit__(self, kind, error, trace) -> None:
        try:
            self.handle.close()
        except OSError as closing:
            error = error or closing
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            self.path.unlink(missing_ok=True)
            free = shutil.disk_usage(self.path.parent).free
            raise DownloadError(
                f"no space left in {self.path.parent} while writing {self.path.name} "
                f"({free} bytes free); the partial file was removed"
            ) from None
        if isinstance(error, OSError):
            raise DownloadError(f"{self.path}: cannot write ({error.strerror or error})") from None


def _check(location: str, part: Path, expected: CatalogFile) -> None:
    size = part.stat().st_size
    if size != expected.size_bytes:
        part.unlink()
        raise DownloadError(
            f"{location}: {size} bytes, the catalogue says {expected.size_bytes}; "
            "the file was removed"
        )
    digest = hashlib.md5(usedforsecurity=False)
    with part.open("rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    if digest.hexdigest() != expected.md5_digest.lower():
        part.unlink()
        raise DownloadError(
            f"{location}: md5 {digest.hexdigest()} differs from the catalogue's "
            f"{expected.md5_digest.lower()}; the file was removed"
        )
