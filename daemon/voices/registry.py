"""Voices by name, built from config and loaded on first use (one copy per process)."""

from __future__ import annotations

import threading

from daemon.config import Config
from daemon.errors import VoiceError
from daemon.runtime.base import Backend
from daemon.voices.base import Voice
from daemon.voices.cosyvoice2 import CosyVoice2Voice
from daemon.voices.vits import VitsVoice

FAMILIES: dict[str, type[Voice]] = {"vits": VitsVoice, "cosyvoice2": CosyVoice2Voice}


class VoiceRegistry:
    def __init__(self, config: Config, backend: Backend) -> None:
        self.config = config
        self.backend = backend
        self._loaded: dict[str, Voice] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self.config.voices)

    def require(self, name: str | None = None) -> str:
        """The voice's name (the default for None); VoiceError naming the known ones if there
        is no such voice. Nothing is loaded."""
        name = name or self.config.voice
        if name not in self.config.voices:
            raise VoiceError(f"unknown voice {name!r} (known: {', '.join(self.names)})")
        return name

    def get(self, name: str | None = None) -> Voice:
        name = self.require(name)
        with self._lock:
            if name not in self._loaded:
                voice_config = self.config.voices[name]
                self._loaded[name] = FAMILIES[voice_config.family](name, voice_config, self.backend)
            return self._loaded[name]
