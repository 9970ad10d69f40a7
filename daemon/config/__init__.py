"""The one YAML configuration file, validated into typed models.

Unknown keys are rejected and every error names its key path and the bad value, so that a
typo in a kiosk's config is found at `fastvoice config check` time, not after a reboot.
Relative paths are resolved against the directory of the file they appear in. One module per
section of the file; what the keys name on the box (files, voices, sounds) is checked in one
step after them (daemon.admin.config_checks).
"""

from daemon.config.audio import AudioConfig, SoundsConfig
from daemon.config.base import (
    DEFAULT_VOICE,
    NAME_PATTERN,
    Reload,
    Reloadable,
    RestartOnly,
    StrictModel,
    VoiceName,
    reload_marks,
)
from daemon.config.loading import (
    ENV_CONFIG,
    SYSTEM_CONFIG,
    config_path_in_use,
    load_config,
    parse_config,
    read_config_file,
)
from daemon.config.model import Config, ConfigInForce
from daemon.config.mqtt import HermesConfig, HomeAssistantConfig, MqttConfig, MqttTlsConfig
from daemon.config.queue import CacheConfig, PregenerateItem, QueueConfig
from daemon.config.runtime import DimRange, GpuConfig, RuntimeConfig
from daemon.config.schedules import QuietWindow, ScheduleEntry
from daemon.config.servers import HttpConfig, LocalConfig, WyomingConfig
from daemon.config.text import LexiconConfig, LexiconEntry, PhonemeEntry, TextConfig
from daemon.config.voices import (
    CatalogConfig,
    CosyVoice2VoiceConfig,
    KokoroVoiceConfig,
    VitsVoiceConfig,
    VoiceConfig,
    default_voices,
)
from daemon.config.yaml_file import MAX_CONFIG_BYTES, read_yaml

__all__ = [
    "DEFAULT_VOICE",
    "ENV_CONFIG",
    "MAX_CONFIG_BYTES",
    "NAME_PATTERN",
    "SYSTEM_CONFIG",
    "AudioConfig",
    "CacheConfig",
    "CatalogConfig",
    "Config",
    "ConfigInForce",
    "CosyVoice2VoiceConfig",
    "DimRange",
    "GpuConfig",
    "HermesConfig",
    "HomeAssistantConfig",
    "HttpConfig",
    "KokoroVoiceConfig",
    "LexiconConfig",
    "LexiconEntry",
    "LocalConfig",
    "MqttConfig",
    "MqttTlsConfig",
    "PhonemeEntry",
    "PregenerateItem",
    "QueueConfig",
    "QuietWindow",
    "Reload",
    "Reloadable",
    "RestartOnly",
    "RuntimeConfig",
    "ScheduleEntry",
    "SoundsConfig",
    "StrictModel",
    "TextConfig",
    "VitsVoiceConfig",
    "VoiceConfig",
    "VoiceName",
    "WyomingConfig",
    "config_path_in_use",
    "default_voices",
    "load_config",
    "parse_config",
    "read_config_file",
    "read_yaml",
    "reload_marks",
]
