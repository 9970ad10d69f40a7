"""`wyoming`, `http` and `local`: the servers beside MQTT."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator

from daemon.config.base import Reloadable, RestartOnly, StrictModel, VoiceName, resolve_path
from daemon.config.secrets import one_source, read_secret
from daemon.errors import ConfigError
from daemon.validation import format_validation_error


class WyomingConfig(StrictModel):
    uri: RestartOnly[str | None] = Field(
        None,
        pattern=r"^(tcp://[^\s/]+:[0-9]{1,5}|unix://\S+)$",
        description="serve the Wyoming protocol here, e.g. tcp://0.0.0.0:10200",
    )
    stream_idle_s: Reloadable[float] = Field(
        30.0,
        ge=0.5,
        le=600.0,
        description="a streamed synthesis (an assistant's answer, token by token) whose client "
        "sends nothing for this long is ended: what it held is spoken, then audio-stop",
    )

    @classmethod
    def checked(cls, uri: str) -> WyomingConfig:
        """From a command-line option; a bad URI is a ConfigError naming the option."""
        try:
            return cls(uri=uri)
        except ValidationError as error:
            raise ConfigError(f"--wyoming:\n{format_validation_error(error)}") from None


_LISTEN = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)?(?::(?P<port>[0-9]{1,5}))?$")


class HttpConfig(StrictModel):
    """REST, the OpenAI-compatible speech endpoint and /metrics; off unless `listen` is set."""

    listen: RestartOnly[str | None] = Field(
        None,
        pattern=_LISTEN.pattern,
        description="HOST:PORT to serve HTTP on (a bare port or ':PORT' binds 127.0.0.1)",
    )
    token_file: RestartOnly[Path | None] = Field(
        None, description="file holding the bearer token (0600)"
    )
    token_env: RestartOnly[str | None] = Field(
        None, description="or: environment variable holding it"
    )
    require_token_for_reads: RestartOnly[bool] = Field(
        False, description="the token for every request, not only those that change state"
    )
    max_body_bytes: RestartOnly[int] = Field(
        65_536, ge=1024, le=10_000_000, description="larger are refused"
    )
    cors_origins: RestartOnly[list[str]] = Field(
        default_factory=list, description="origins allowed by CORS"
    )
    stream_idle_s: Reloadable[float] = Field(
        30.0,
        ge=0.5,
        le=600.0,
        description="POST /api/say/stream: a body that sends nothing for this long is ended "
        "(what it held is spoken)",
    )
    voice_aliases: Reloadable[dict[Annotated[str, Field(max_length=64)], VoiceName]] = Field(
        default_factory=dict,
        description="other names for voices (alloy: en_US-joe-medium), taken wherever a "
        "request names a voice: clients written for OpenAI send its voice names",
    )

    _resolve = field_validator("token_file")(resolve_path)

    @model_validator(mode="after")
    def _one_token_source(self) -> HttpConfig:
        one_source("token", self.token_file, self.token_env)
        return self

    def address(self) -> tuple[str, int] | None:
        """(host, port) to bind, or None when HTTP is off."""
        if self.listen is None:
            return None
        if self.listen.isdigit():
            return "127.0.0.1", int(self.listen)
        found = _LISTEN.fullmatch(self.listen)
        assert found is not None  # the field's pattern
        host, port = found.group("host"), found.group("port")
        return (host or "127.0.0.1").strip("[]"), int(port or 8080)

    def token(self) -> SecretStr | None:
        return read_secret(self.token_file, self.token_env)

    @classmethod
    def checked(cls, listen: str) -> HttpConfig:
        """From `serve --http`; a bad address is a ConfigError naming the option."""
        try:
            return cls(listen=listen)
        except ValidationError as error:
            raise ConfigError(f"--http:\n{format_validation_error(error)}") from None


# Restart-only, every key: marked where Config declares `local`.
class LocalConfig(StrictModel):
    socket: bool = Field(
        True,
        description="take `fastvoice say` jobs from this box on a Unix socket (systemd's "
        "RuntimeDirectory, else $XDG_RUNTIME_DIR/fastvoice; $FASTVOICE_SOCKET overrides)",
    )
