"""Voices by name, from the config and the voices directory, loaded on first use (one copy per
process). `refresh` takes voices installed or removed since, without a restart."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from daemon.config import Config, VitsVoiceConfig, VoiceConfig
from daemon.errors import VoiceError
from daemon.runtime.artifacts import default_store
from daemon.runtime.base import Backend
from daemon.text.script import Utterance
from daemon.voices.base import Voice
from daemon.voices.installed import installed, voices_dir

# Family → (module, class), imported when a voice of the family is first loaded: a command that
# speaks with a Piper voice never imports the CosyVoice 2 pipeline.
FAMILIES: dict[str, tuple[str, str]] = {
    "vits": ("daemon.voices.vits", "VitsVoice"),
    "cosyvoice2": ("daemon.voices.cosyvoice2", "CosyVoice2Voice"),
}


def voice_class(family: str) -> type[Voice]:
    module, name = FAMILIES[family]
    return getattr(importlib.import_module(module), name)


def voice_configs(config: Config) -> dict[str, VoiceConfig]:
    """Every voice the box can speak with: the installed ones, and the configured ones (which
    win where a name is both)."""
    voices: dict[str, VoiceConfig] = {
        name: VitsVoiceConfig(model=voice.model, config=voice.config_file)
        for name, voice in installed(voices_dir(config.catalog.dir)).items()
    }
    voices.update(config.voices)
    return voices


class VoiceRegistry:
    """The voices (configured and installed; `refresh` rescans) and the default one (which a
    reload or the MQTT `voice` command changes)."""

    def __init__(self, config: Config, backend: Backend) -> None:
        self.default = config.voice
        self.backend = backend
        self.loudness_store: Path = config.runtime.artifact_dir or default_store()
        self.configs: dict[str, VoiceConfig] = voice_configs(config)
        self._loaded: dict[str, Voice] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self.configs)

    def refresh(self, config: Config) -> tuple[list[str], list[str]]:
        """Rescans the voices directory: (added, removed). A voice whose settings or files
        changed (a reinstall) is loaded again at its next use; the default voice is never
        dropped."""
        configs = voice_configs(config)
        with self._lock:
            if self.default not in configs and self.default in self.configs:
                configs[self.default] = self.configs[self.default]
            added = sorted(set(configs) - set(self.configs))
            removed = sorted(set(self.configs) - set(configs))
            for name, voice in list(self._loaded.items()):
                if configs.get(name) != self.configs.get(name) or voice.changed_on_disk():
                    del self._loaded[name]
            self.configs = configs
        return added, removed

    def require(self, name: str | None = None) -> str:
        """The voice's name (the default for None); VoiceError naming the known ones if there
        is no such voice. Nothing is loaded."""
        name = name or self.default
        if name not in self.configs:
            raise VoiceError(f"unknown voice {name!r} (known: {', '.join(self.names)})")
        return name

    def language(self, name: str) -> str:
        return self.get(name).info.language

    def check(self, name: str, utterance: Utterance) -> None:
        """Raises TextError if the voice cannot speak the utterance as written."""
        self.get(name).check_utterance(utterance)

    def get(self, name: str | None = None) -> Voice:
        name = self.require(name)
        with self._lock:
            if name not in self._loaded:
                voice_config = self.configs[name]
                family = voice_class(voice_config.family)
                if voice_config.family == "vits":
                    voice = family(name, voice_config, self.backend, self.loudness_store)
                else:
                    voice = family(name, voice_config, self.backend)
                self._loaded[name] = voice
            return self._loaded[name]
