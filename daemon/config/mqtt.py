"""`mqtt`, `homeassistant` and `hermes`: the broker, the topics, and the adapters that speak
over it. Secrets are read when needed (daemon.config.secrets); whether their files and
variables are there is one of the config's file checks."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from daemon.config.base import Reloadable, RestartOnly, StrictModel, TopicLevel, resolve_path
from daemon.config.secrets import one_source, read_secret

# A zone's or a render group's name: one topic level.
GroupName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


class MqttTlsConfig(StrictModel):
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    _resolve = field_validator("ca_file", "cert_file", "key_file")(resolve_path)

    @model_validator(mode="after")
    def _cert_with_key(self) -> MqttTlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("'cert_file' and 'key_file' go together")
        return self


class MqttConfig(StrictModel):
    host: RestartOnly[str] = "localhost"
    port: RestartOnly[int] = Field(1883, ge=1, le=65535)
    username: RestartOnly[str | None] = None
    password_file: RestartOnly[Path | None] = Field(
        None, description="file holding the password (mode 0600)"
    )
    password_env: RestartOnly[str | None] = Field(
        None, description="environment variable holding the password"
    )
    client_id: RestartOnly[str | None] = None
    base_topic: RestartOnly[str] = Field(
        "fastvoice/{hostname}", description="'{hostname}' is replaced by this box's host name"
    )
    qos: RestartOnly[Literal[0, 1, 2]] = 1
    keepalive_s: RestartOnly[int] = Field(30, ge=5, le=3600)
    stats_interval_s: Reloadable[float] = Field(
        60.0, ge=1.0, le=86_400, description="period of `stats`"
    )
    tls: RestartOnly[MqttTlsConfig | None] = None
    reply_topic_prefixes: Reloadable[list[str]] = Field(
        default_factory=list,
        description="topics outside base_topic that a `say` may name as its reply_topic",
    )
    publish_format: Reloadable[Literal["wav", "pcm", "flac", "mp3", "opus"]] = Field(
        "wav", description="published audio's format when a `say` names none"
    )
    publish_sample_rate: Reloadable[int | None] = Field(
        None,
        ge=8000,
        le=48000,
        description="published audio's rate when a `say` names none (default: the voice's)",
    )
    fleet_topic: RestartOnly[str | None] = Field(
        None,
        description="where zones and the whole fleet are addressed (default: base_topic's parent)",
    )
    zones: RestartOnly[list[GroupName]] = Field(
        default_factory=list, description="the zones this box belongs to"
    )
    render_group: RestartOnly[GroupName | None] = Field(
        None,
        description="take publish-only jobs from the fleet's shared render queue "
        "(<fleet_topic>/render/say) with the other boxes of this group; null: take none",
    )

    _resolve = field_validator("password_file")(resolve_path)

    @property
    def fleet(self) -> str | None:
        """The fleet topic in force: fleet_topic, else the parent of base_topic (None when
        base_topic has no parent and none is set)."""
        if self.fleet_topic is not None:
            return self.fleet_topic
        parent = self.base_topic.rpartition("/")[0]
        return parent or None

    @field_validator("fleet_topic")
    @classmethod
    def _plain_fleet_topic(cls, value: str | None) -> str | None:
        if value is not None and (
            not value or any(c in value for c in "#+\0") or value.startswith(("$", "/"))
        ):
            raise ValueError(f"{value!r} is not a plain topic (no wildcards, no $)")
        return None if value is None else value.rstrip("/")

    @field_validator("reply_topic_prefixes")
    @classmethod
    def _plain_prefixes(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or any(c in value for c in "#+\0") or value.startswith(("$", "/")):
                raise ValueError(f"{value!r} is not a plain topic prefix (no wildcards, no $)")
        return [value.rstrip("/") for value in values]

    @field_validator("base_topic")
    @classmethod
    def _plain_topic(cls, value: str) -> str:
        value = value.replace("{hostname}", socket.gethostname())
        if (
            not value
            or any(c in value for c in "#+\0")
            or value.startswith("/")
            or value.endswith("/")
        ):
            raise ValueError(
                f"{value!r} is not a plain topic (no wildcards, no leading or trailing '/')"
            )
        return value

    @model_validator(mode="after")
    def _not_a_fleet_topic(self) -> MqttConfig:
        fleet = self.fleet
        if self.render_group is not None and fleet is None:
            raise ValueError(
                "render_group needs a fleet topic: set fleet_topic, or a base_topic with a parent"
            )
        if fleet is not None and self.base_topic.startswith(f"{fleet}/"):
            first = self.base_topic.removeprefix(f"{fleet}/").split("/")[0]
            if first in ("all", "zone", "render"):
                raise ValueError(
                    f"base_topic {self.base_topic!r} lies on the fleet's own topics "
                    f"({fleet}/all, {fleet}/zone, {fleet}/render): name the box otherwise"
                )
        return self

    @model_validator(mode="after")
    def _one_password_source(self) -> MqttConfig:
        one_source("password", self.password_file, self.password_env)
        return self

    def password(self) -> SecretStr | None:
        """The password, read when needed so that it never sits in the config object."""
        return read_secret(self.password_file, self.password_env)


# Restart-only, every key: marked where Config declares `homeassistant`.
class HomeAssistantConfig(StrictModel):
    """MQTT discovery: the box appears in Home Assistant as a device with its entities."""

    discovery: bool = Field(False, description="publish retained discovery configs")
    prefix: TopicLevel = Field("homeassistant", description="Home Assistant's discovery prefix")
    node_id: TopicLevel | None = Field(
        None, description="this box in discovery topics and unique ids; default: the host name"
    )


class HermesConfig(StrictModel):
    """Rhasspy's Hermes TTS: hermes/tts/say → the same queue → hermes/tts/sayFinished."""

    enabled: RestartOnly[bool] = False
    site_id: Reloadable[TopicLevel] = Field(
        "default", description="answer `say` messages for this siteId"
    )
    any_site: Reloadable[bool] = Field(False, description="answer `say` messages for every siteId")
    remote_playback: Reloadable[bool] = Field(
        False, description="publish WAV to the site's audioServer playBytes instead of playing"
    )
    play_finished_timeout_s: Reloadable[float] = Field(
        120.0, gt=0, le=3600, description="send sayFinished anyway when playFinished never comes"
    )
