"""A YAML file the config reads (the config itself, a lexicon), bounded in size; every problem
a ConfigError naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.errors import ConfigError

MAX_CONFIG_BYTES = 1_000_000


def read_yaml(path: Path) -> Any:
    """A YAML file of at most MAX_CONFIG_BYTES; ConfigError naming the file and the problem."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes, above the maximum {MAX_CONFIG_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start})") from None
    import yaml  # only where a file is read: the built-in defaults need no parser

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
