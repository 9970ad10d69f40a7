"""The whole file: one model per section, each in a module of its own, joined here."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import Field, field_validator, model_validator

from daemon.config.audio import AudioConfig, SoundsConfig
from daemon.config.base import DEFAULT_VOICE, Reloadable, RestartOnly, StrictModel, VoiceName
from daemon.config.mqtt import HermesConfig, HomeAssistantConfig, MqttConfig
from daemon.config.queue import CacheConfig, QueueConfig
from daemon.config.runtime import GpuConfig, RuntimeConfig
from daemon.config.schedules import QuietWindow, ScheduleEntry
from daemon.config.servers import HttpConfig, LocalConfig, WyomingConfig
from daemon.config.text import TextConfig
from daemon.config.voices import CatalogConfig, VoiceConfig, default_voices


class Config(StrictModel):
    """The whole file. Every default here is also written out in config/fastvoice.yaml."""

    # Each key is marked Reloadable or RestartOnly (daemon.config.base.Reload): a section whose
    # keys are all of one kind here, the keys of the other sections in their own models.

    version: RestartOnly[Literal[1]] = 1
    voice: Reloadable[VoiceName] = Field(
        DEFAULT_VOICE, description="voice used when a request names none"
    )
    voices: RestartOnly[dict[VoiceName, VoiceConfig]] = Field(default_factory=default_voices)
    catalog: Reloadable[CatalogConfig] = Field(default_factory=CatalogConfig)
    runtime: RestartOnly[RuntimeConfig] = Field(default_factory=RuntimeConfig)
    gpu: RestartOnly[GpuConfig] = Field(default_factory=GpuConfig)
    text: Reloadable[TextConfig] = Field(default_factory=TextConfig)
    audio: AudioConfig = Field(default_factory=AudioConfig)
    sounds: Reloadable[SoundsConfig] = Field(default_factory=SoundsConfig)
    time_zone: Reloadable[str | None] = Field(
        None, description="IANA time zone of quiet_hours (default: the box's own)"
    )
    quiet_hours: Reloadable[list[QuietWindow]] = Field(default_factory=list)
    schedules: Reloadable[list[ScheduleEntry]] = Field(default_factory=list)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    mqtt: MqttConfig = Field(default_factory=MqttConfig)
    homeassistant: RestartOnly[HomeAssistantConfig] = Field(default_factory=HomeAssistantConfig)
    hermes: HermesConfig = Field(default_factory=HermesConfig)
    wyoming: WyomingConfig = Field(default_factory=WyomingConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    local: RestartOnly[LocalConfig] = Field(default_factory=LocalConfig)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"{value!r} is not a known time zone (e.g. Europe/Berlin)"
                ) from None
        return value

    @model_validator(mode="after")
    def _schedule_names_once(self) -> Config:
        names = set()
        for index, entry in enumerate(self.schedules):
            name = entry.name_at(index)
            if name in names:
                raise ValueError(f"schedules.{index}.name: {name!r} is used twice")
            names.add(name)
        return self


class ConfigInForce(Protocol):
    """What holds the config in force (the service's settings): parts below the service read
    `config` at each use, so a reload that replaces it reaches them."""

    @property
    def config(self) -> Config: ...
