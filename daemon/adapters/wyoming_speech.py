"""What a Wyoming connection asks of the service: its `info` (voices, languages, speakers), the
audio of a text as `fastvoice say` makes it, a voice's sample rate, and one of the places of
`max_requests` while it synthesizes. The server makes one and hands it to every connection."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from daemon import __version__
from daemon.audio.pcm import join_sentences
from daemon.settings import Settings
from daemon.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions


class WyomingSpeech:
    def __init__(self, synthesizer: Synthesizer, settings: Settings, max_requests: int) -> None:
        self.synthesizer = synthesizer
        self.settings = settings
        self.admission = threading.Semaphore(max_requests)

    def info(self):
        from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

        attribution = Attribution(name="fastvoice", url="")
        voices = []
        for name in self.synthesizer.voices.names:
            info = self.synthesizer.voices.get(name).info
            voices.append(
                TtsVoice(
                    name=name,
                    description=f"{name} ({info.family}, {info.sample_rate} Hz)",
                    attribution=attribution,
                    installed=True,
                    version=None,
                    languages=[info.language],
                    speakers=[TtsVoiceSpeaker(s) for s in info.speakers] or None,
                )
            )
        program = TtsProgram(
            name="fastvoice",
            description="offline neural text to speech",
            attribution=attribution,
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    def blocks(
        self, text: str, voice: str | None, speaker: str | None, *, ssml: bool = False
    ) -> Iterator[np.ndarray]:
        """The audio of `text` as `fastvoice say` makes it (sentence pauses and fades)."""
        options = SpeechOptions(speaker=int(speaker) if speaker and speaker.isdigit() else speaker)
        name = self.synthesizer.voices.require(voice)
        chunks = self.synthesizer.synthesize(text, name, options, ssml=ssml)
        audio = self.settings.config.audio
        return self._admitted(
            join_sentences(
                chunks,
                self.rate_of(name),
                audio.sentence_pause_s,
                audio.fade_ms,
            )
        )

    def _admitted(self, blocks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """The blocks, made while this request holds one of the `max_requests` places (taken
        at its first block, given back at its end, or when the client goes and the generator
        is closed)."""
        with self.admission:
            yield from blocks

    def rate_of(self, voice: str | None) -> int:
        return self.synthesizer.voices.get(voice).info.sample_rate
