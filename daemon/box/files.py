"""Where the daemon keeps its files, and how it writes them so that a crash leaves no half file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from daemon.errors import FastvoiceError


def systemd_or_user_dir(systemd_variable: str, xdg_variable: str, home_default: str) -> Path:
    """systemd's directory for the unit (e.g. $CACHE_DIRECTORY) when run by it, else the user's
    XDG directory (or its default under home), each with a `fastvoice` folder."""
    given = os.environ.get(systemd_variable)
    if given:
        return Path(given.split(":")[0])
    xdg = os.environ.get(xdg_variable)
    return (Path(xdg) if xdg else Path.home() / home_default) / "fastvoice"


def state_root() -> Path:
    """systemd's StateDirectory when run by it, else the user's state directory."""
    return systemd_or_user_dir("STATE_DIRECTORY", "XDG_STATE_HOME", ".local/state")


@contextmanager
def replaced_atomically(path: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """A temporary file next to `path`, renamed onto it once written; on any failure it is
    removed and `path` is left as it was."""
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            yield out
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def save_audio(path: Path, data: bytes) -> None:
    """Audio a command was sent back (`say -o`, `send -o`), written atomically; a file that
    cannot be written is an error naming it."""
    try:
        with replaced_atomically(path, mode=0o644) as handle:
            handle.write(data)
    except OSError as error:
        raise FastvoiceError(f"cannot write {path}: {error.strerror or error}") from None
