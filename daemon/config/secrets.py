"""Passwords and tokens: from a file only its owner may read, or from the environment; read
when needed, so that a secret never sits in the config object."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import SecretStr


def one_source(what: str, file: Path | None, env: str | None) -> None:
    """A ValueError when both a file and a variable are named."""
    if file is not None and env is not None:
        raise ValueError(f"give at most one of '{what}_file' or '{what}_env'")


def source_problem(what: str, file: Path | None, env: str | None) -> str | None:
    """What is wrong with where the secret comes from (a missing file, a file others may read,
    an unset variable), as '<key>: problem'; None when it can be read."""
    if file is not None:
        if not file.is_file():
            return f"{what}_file: {str(file)!r} does not exist"
        if file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return f"{what}_file: {str(file)!r} is readable by others; chmod 600 it"
    if env is not None and env not in os.environ:
        return f"{what}_env: environment variable {env!r} is not set"
    return None


def read_secret(file: Path | None, env: str | None) -> SecretStr | None:
    if file is not None:
        return SecretStr(file.read_text(encoding="utf-8").rstrip("\r\n"))
    if env is not None:
        return SecretStr(os.environ[env])
    return None
