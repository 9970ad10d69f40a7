"""Voices by name, from the config and the voices directory, loaded on first use (one copy per
process). `refresh` takes voices installed or removed since, without a restart.

A voice that cannot load (a damaged model, a missing package, a graph that is not a voice's) is
quarantined: it is reported with its error and its fix, every request for it gets that error,
and the others go on. If it is the default voice, the embedded voice stands in for it.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config import DEFAULT_VOICE, Config, VitsVoiceConfig, VoiceConfig, default_voices
from daemon.errors import VoiceError, error_text
from daemon.runtime.artifacts import default_store
from daemon.runtime.base import Backend
from daemon.text.script import Utterance
from daemon.voices.base import Voice
from daemon.voices.bundled import installed_bundled
from daemon.voices.installed import installed, voices_dir

log = logging.getLogger(__name__)
# Family → (module, class), imported when a voice of the family is first loaded: a command that
# speaks with a Piper voice never imports the CosyVoice 2 pipeline.
FAMILIES: dict[str, tuple[str, str]] = {
    "vits": ("daemon.voices.vits", "VitsVoice"),
    "cosyvoice2": ("daemon.voices.cosyvoice2", "CosyVoice2Voice"),
    "kokoro": ("daemon.voices.kokoro", "KokoroVoice"),
}


def voice_class(family: str) -> type[Voice]:
    module, name = FAMILIES[family]
    return getattr(importlib.import_module(module), name)


def voice_configs(config: Config) -> dict[str, VoiceConfig]:
    """Every voice the box can speak with: the installed ones (from the catalogue or bundled
    with an extra), and the configured ones (which win where a name is both)."""
    root = voices_dir(config.catalog.dir)
    voices: dict[str, VoiceConfig] = {
        name: VitsVoiceConfig(model=voice.model, config=voice.config_file)
        for name, voice in installed(root).items()
    }
    voices.update(installed_bundled(root))
    voices.update(config.voices)
    return voices


TRIAL_SENTENCE = "Test."


def trial(name: str, voice_config: VoiceConfig, store: Path | None = None) -> None:
    """Loads a voice on a CPU session of its own and speaks a test sentence: VoiceError with
    the reason when it cannot (a voice is installed only once this passed). A Kokoro voice
    finds its graph in the artifact store `store` (default: the user's)."""
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.base import SpeechOptions

    try:
        family = voice_class(voice_config.family)
        backend = OrtCpuBackend(threads=1)
        if voice_config.family == "kokoro":
            voice = family(name, voice_config, backend, store or default_store())
        else:
            voice = family(name, voice_config, backend)
        pieces = list(voice.synthesize_sentence(TRIAL_SENTENCE, SpeechOptions()))
    except Exception as error:  # whatever its files make a loader or a run raise
        raise VoiceError(f"voice {name!r} does not load: {error_text(error)}") from None
    if not any(piece.samples.size for piece in pieces):
        raise VoiceError(f"voice {name!r} said nothing for the test sentence {TRIAL_SENTENCE!r}")


@dataclass(frozen=True)
class BrokenVoice:
    """A voice that failed to load: why, and what fixes it."""

    name: str
    error: str
    installed: bool  # from the voices directory (else from the config's `voices`)

    @property
    def fix(self) -> str:
        if self.installed:
            return (
                f"fastvoice voices remove {self.name}, or fastvoice voices install {self.name} "
                "again (then systemctl reload fastvoice)"
            )
        return f"fix voices.{self.name} in the config (then systemctl reload fastvoice)"

    @property
    def message(self) -> str:
        return f"voice {self.name!r} cannot be used: {self.error} (fix: {self.fix})"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "error": self.error, "fix": self.fix}


class VoiceRegistry:
    """The voices (configured and installed; `refresh` rescans) and the default one (which a
    reload or the MQTT `voice` command changes)."""

    def __init__(self, config: Config, backend: Backend) -> None:
        self.default = config.voice
        self.fallback_from: str | None = None  # the default voice while the embedded stands in
        self.backend = backend
        self.artifact_store: Path = config.runtime.artifact_dir or default_store()
        self.configs: dict[str, VoiceConfig] = voice_configs(config)
        self.broken: dict[str, BrokenVoice] = {}
        self._configured = set(config.voices)
        self._loaded: dict[str, Voice] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return sorted(self.configs)

    def usable(self) -> list[str]:
        """The voices that load (each loaded now if it was not); the others are quarantined."""
        names = []
        for name in self.names:
            try:
                self.get(name)
            except VoiceError:
                continue
            names.append(name)
        return names

    def refresh(self, config: Config) -> tuple[list[str], list[str]]:
        """Rescans the voices directory: (added, removed). A voice whose settings or files
        changed (a reinstall) is loaded again at its next use, and a quarantined voice is tried
        again; the default voice is never dropped."""
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
            self._configured = set(config.voices)
            self.broken.clear()
            if self.fallback_from is not None:
                self.default, self.fallback_from = self.fallback_from, None
        return added, removed

    def fall_back(self) -> BrokenVoice | None:
        """When the default voice is quarantined, the embedded voice becomes the default (the
        configured one is tried again at the next refresh). Returns the broken default, or
        None when it loads."""
        broken = self.broken.get(self.default)
        if broken is None or self.default == DEFAULT_VOICE:
            return None
        with self._lock:
            self.configs.setdefault(DEFAULT_VOICE, default_voices()[DEFAULT_VOICE])
        self.fallback_from, self.default = self.default, DEFAULT_VOICE
        return broken

    def quarantine(self, name: str, error: str) -> BrokenVoice:
        """Takes a voice out of use until the next refresh (it loaded but cannot speak)."""
        with self._lock:
            return self._quarantine(name, error)

    def _quarantine(self, name: str, error: str) -> BrokenVoice:
        broken = BrokenVoice(name, error, name not in self._configured)
        self.broken[name] = broken
        self._loaded.pop(name, None)
        log.error("%s; the other voices go on", broken.message)
        return broken

    def require(self, name: str | None = None) -> str:
        """The voice's name (the default for None); VoiceError naming the known ones if there
        is no such voice. Nothing is loaded."""
        name = name or self.default
        if name not in self.configs:
            raise VoiceError(f"unknown voice {name!r} (known: {', '.join(self.names)})")
        return name

    def language(self, name: str) -> str:
        return self.get(name).info.language

    def choose(self, name: str | None = None, language: str | None = None) -> str:
        """The voice a request gets, for every interface: the one it names, else one that
        speaks the `language` it asks for (the default voice if it does; a language tag as
        `ja`, `ja_JP` or `en-US`, its region matched first), else the default. VoiceError
        names an unknown voice, or the languages the box speaks."""
        if name or not language:
            return self.require(name)
        wanted = _language_tag(language)
        spoken = {voice: _language_tag(self.language(voice)) for voice in self.usable()}
        in_order = sorted(spoken, key=lambda voice: voice != self.default)
        for same in (str.__eq__, lambda tag, want: tag.split("_")[0] == want.split("_")[0]):
            for voice in in_order:
                if same(spoken[voice], wanted):
                    return voice
        languages = ", ".join(sorted({self.language(voice) for voice in spoken})) or "none"
        raise VoiceError(f"no voice here speaks {language!r} (the voices speak: {languages})")

    def check(self, name: str, utterance: Utterance) -> None:
        """Raises TextError if the voice cannot speak the utterance as written."""
        self.get(name).check_utterance(utterance)

    def get(self, name: str | None = None) -> Voice:
        """The voice, loaded on first use. VoiceError with its error and fix when it cannot
        load (it stays quarantined until the next refresh: not loaded again by each request)."""
        name = self.require(name)
        with self._lock:
            if name in self.broken:
                raise VoiceError(self.broken[name].message)
            if name not in self._loaded:
                try:
                    self._loaded[name] = self._load(name, self.configs[name])
                except Exception as error:  # whatever its files make a loader raise
                    broken = self._quarantine(name, error_text(error))
                    raise VoiceError(broken.message) from None
            return self._loaded[name]

    def _load(self, name: str, voice_config: VoiceConfig) -> Voice:
        family = voice_class(voice_config.family)
        if voice_config.family in ("vits", "kokoro"):  # they keep what the box made there
            return family(name, voice_config, self.backend, self.artifact_store)
        return family(name, voice_config, self.backend)


def _language_tag(tag: str) -> str:
    """`ja-JP`, `ja_jp` and `ja_JP` alike."""
    return tag.strip().replace("-", "_").lower()
