"""Voices by name, from the config and the voices directory, loaded on first use (one copy per
process). `refresh` takes voices installed or removed since, without a restart.

A voice that cannot load (a damaged model, a missing package, a graph that is not a voice's) is
quarantined: it is reported with its error and its fix, every request for it gets that error,
and the others go on. If it is the default voice, the embedded voice stands in for it.

The default voice in force lives here, and only here: the voice chosen (the config's `voice` at
start and at a reload that changes it, the MQTT `voice` command) and, derived from it, the
embedded voice while the chosen one is quarantined. The config's `voice` is what the file says.
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
    """The voices (configured and installed; `refresh` rescans) and the default one (which
    `set_default` chooses: a reload that changes the config's `voice`, the MQTT `voice`
    command)."""

    def __init__(self, config: Config, backend: Backend) -> None:
        self._chosen = config.voice  # the default voice as chosen (set_default)
        self._broken_default: str | None = None  # a chosen default found broken (fall_back)
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

    @property
    def default(self) -> str:
        """The voice of requests that name none: the chosen one, or the embedded voice while
        the chosen one is broken (`fallback_from`)."""
        chosen = self._chosen
        return DEFAULT_VOICE if chosen == self._broken_default else chosen

    @property
    def fallback_from(self) -> str | None:
        """The chosen default voice while the embedded voice stands in for it, else None."""
        chosen = self._chosen
        return chosen if chosen == self._broken_default else None

    def set_default(self, name: str) -> None:
        """Chooses the default voice (a name of `names`: callers check it with `require`). It
        holds until the next choice, whatever a refresh or a fallback does: the embedded voice
        stands in for it only while it is the one found broken."""
        self._chosen = name

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
        again; the default voice (the chosen one, and the embedded one standing in for it) is
        never dropped."""
        configs = voice_configs(config)
        with self._lock:
            for name in (self._chosen, self.default):
                if name not in configs and name in self.configs:
                    configs[name] = self.configs[name]
            added = sorted(set(configs) - set(self.configs))
            removed = sorted(set(self.configs) - set(configs))
            for name, voice in list(self._loaded.items()):
                if configs.get(name) != self.configs.get(name) or voice.changed_on_disk():
                    del self._loaded[name]
            self.configs = configs
            self._configured = set(config.voices)
            self.broken.clear()
            self._broken_default = None  # the chosen default is tried again
        return added, removed

    def fall_back(self) -> BrokenVoice | None:
        """When the chosen default voice is quarantined, the embedded voice stands in for it
        until the next refresh tries it again, or another voice is chosen. Returns the broken
        default (once), or None when it loads."""
        chosen = self._chosen
        broken = self.broken.get(chosen)
        if broken is None or chosen in (DEFAULT_VOICE, self._broken_default):
            return None
        with self._lock:
            self.configs.setdefault(DEFAULT_VOICE, default_voices()[DEFAULT_VOICE])
        self._broken_default = chosen
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
