"""The voices made ready to speak: the artifacts the box lacks built, each voice loaded and run
once (ONNX Runtime's first run is slow: paid here, not by the first job), a voice that cannot
load or speak quarantined with a `voice_broken` event, the configured phrases rendered into the
cache; and the same again for voices installed or removed while the service runs."""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.box import sdnotify
from daemon.errors import FastvoiceError, VoiceError, error_text
from daemon.service.artifact_build import build_missing_artifacts
from daemon.service.event_sink import EventSink
from daemon.service.settings import Settings
from daemon.speech.cache import PhraseCache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions

log = logging.getLogger(__name__)


class VoiceLoading:
    def __init__(
        self,
        settings: Settings,
        synthesizer: Synthesizer,
        cache: PhraseCache | None,
        events: EventSink,
        broker_connected: Callable[[], bool],
    ) -> None:
        """`broker_connected`: whether a `voice_broken` event would reach anyone now (else it
        waits for the broker, and `announce_broken` is called when it comes)."""
        self.settings = settings
        self.synthesizer = synthesizer
        self.voices = synthesizer.voices
        self.cache = cache
        self.events = events
        self.broker_connected = broker_connected
        self.artifacts_problem: str | None = None
        self.unannounced_broken: list[str] = []
        # Told when voices came or went (Home Assistant's voice select, status/info).
        self.changed_listeners: list[Callable[[], None]] = []

    def start(self) -> None:
        gpu_in_play = self.voices.backend.gpu_report() is not None
        self.artifacts_problem = build_missing_artifacts(self.settings.config, gpu_in_play)
        sdnotify.notify("STATUS=loading voices")
        self.load(self.voices.names)
        self.pregenerate()

    def load(self, names: list[str]) -> None:
        """Loads and warms voices. One that cannot load or speak is quarantined (reported in
        status/info, metrics and a `voice_broken` event); if it is the default voice, the
        embedded voice stands in for it, said in the log and the event."""
        for name in names:
            self.warm(name)
        broken_default = self.voices.fall_back()
        if broken_default is not None:
            log.error(
                "the default voice %r cannot be used; speaking with the embedded voice %r "
                "until it is fixed (%s)",
                broken_default.name,
                self.voices.default,
                broken_default.fix,
            )
            self.warm(self.voices.default)
        self.unannounced_broken += [
            name
            for name in self.voices.broken
            if name in names and name not in self.unannounced_broken
        ]

    def warm(self, name: str) -> None:
        """Loads a voice and runs it once; a voice that fails is quarantined."""
        try:
            voice = self.voices.get(name)
        except VoiceError:  # quarantined by the registry as it failed to load
            return
        try:
            for _ in voice.synthesize_sentence("Ready.", SpeechOptions()):
                pass
        except Exception as error:  # it loaded, but cannot speak
            self.voices.quarantine(name, f"cannot speak: {error_text(error)}")

    def announce_broken(self) -> None:
        """A `voice_broken` event for each voice quarantined since the last announcement."""
        for name in self.unannounced_broken:
            broken = self.voices.broken.get(name)
            if broken is None:
                continue
            fallback = self.voices.default if self.voices.fallback_from == name else None
            fields = {"message": broken.message, "fix": broken.fix, "fallback": fallback}
            self.events.emit("voice_broken", None, voice=name, **fields)
        self.unannounced_broken = []

    def pregenerate(self) -> None:
        """Renders the configured fixed phrases into the cache (already cached ones are hits)."""
        items = self.settings.config.cache.pregenerate
        if self.cache is None or not items:
            return
        for number, item in enumerate(items, 1):
            sdnotify.notify(f"STATUS=pregenerating phrase {number}/{len(items)}")
            options = SpeechOptions(speaker=item.speaker)
            try:
                for _ in self.synthesizer.synthesize(item.text, item.voice, options):
                    pass
            except FastvoiceError as error:
                log.error("cache.pregenerate.%d: %s", number - 1, error)

    def refresh(self) -> None:
        """Takes voices installed or removed since (the voices directory is rescanned), and
        tries the quarantined ones again; loaded and warmed here, not on the network thread
        of a first job."""
        retried = sorted(self.voices.broken)
        added, removed = self.voices.refresh(self.settings.config)
        self.load(sorted({*added, *retried} - set(removed)))
        if self.broker_connected():
            self.announce_broken()
        if added or removed:
            log.info("voices: added %s; removed %s", added or "none", removed or "none")
            for listener in self.changed_listeners:
                listener()
