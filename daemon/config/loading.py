"""Finding, reading and validating the config file's keys (the models): a ConfigError names the
file and each key path. Nothing here looks at what the keys name on the box (files, voices,
chimes): that is `daemon.admin.config_checks`, called by those who use the config here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.config.model import Config
from daemon.config.yaml_file import read_yaml
from daemon.errors import ConfigError
from daemon.validation import format_validation_error

ENV_CONFIG = "FASTVOICE_CONFIG"
SYSTEM_CONFIG = Path("/etc/fastvoice/fastvoice.yaml")


def parse_config(data: Any, *, base_dir: Path | None = None, source: str = "config") -> Config:
    """Validate an already-parsed document; `source` names it in error messages."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys, got {type(data).__name__}"
        )
    try:
        return Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as error:
        raise ConfigError(f"{source}:\n{format_validation_error(error)}") from None


def read_config_file(path: Path) -> Config:
    return parse_config(read_yaml(path), base_dir=path.parent, source=str(path))


def config_path_in_use(explicit: Path | None) -> Path | None:
    """--config, then $FASTVOICE_CONFIG, then /etc/fastvoice/fastvoice.yaml if present."""
    if explicit is not None:
        return explicit
    if os.environ.get(ENV_CONFIG):
        return Path(os.environ[ENV_CONFIG])
    if SYSTEM_CONFIG.is_file():
        return SYSTEM_CONFIG
    return None


def load_config(explicit: Path | None = None) -> Config:
    path = config_path_in_use(explicit)
    return read_config_file(path) if path is not None else parse_config({})
