"""Voices by name, built from config and loaded on first use (one copy per process)."""

from __future__ import annotations

import importlib
import threading

from daemon.config import Config
from daemon.errors import VoiceError
from daemon.runtime.base import Backend
from daemon.text.script import Utterance
from daemon.voices.base import Voice

# Family → (module, class), imported when a voice of the family is first loaded: a command that
# speaks with a Piper voice never imports the CosyVoice 2 pipeline.
FAMILIES: dict[str, tuple[str, str]] = {
    "vits": ("daemon.voices.vits", "VitsVoice"),
    "cosyvoice2": ("daemon.voices.cosyvoice2", "CosyVoice2Voice"),
}


def voice_class(family: str) -> type[Voice]:
    module, name = FAMILIES[family]
    return getattr(importlib.import_module(module), name)


class VoiceRegistry:
    """The configured voices (fixed while the process runs) and the default one (which a
    reload or the MQTT `voice` command changes)."""

    def __init__(self, config: Config, backend: Backend) -> None:
        self.configs = config.voices
        self.default = config.voice
        self.backend = backend
        self._loaded: dict[str, Voice] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self.configs)

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
                self._loaded[name] = family(name, voice_config, self.backend)
            return self._loaded[name]
