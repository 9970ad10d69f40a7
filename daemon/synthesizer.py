"""Text → sentences → voice → audio chunks, one sentence at a time so playback starts early."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import numpy as np

from daemon import faults
from daemon.audio.piece import AudioPiece
from daemon.cache import PhraseCache, cache_key
from daemon.errors import TextError
from daemon.settings import Settings
from daemon.text import prepare
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry


class Synthesizer:
    def __init__(
        self, voices: VoiceRegistry, settings: Settings, cache: PhraseCache | None = None
    ) -> None:
        self.voices = voices
        self.settings = settings
        self.cache = cache

    def synthesize(
        self, text: object, voice: str | None = None, options: SpeechOptions | None = None
    ) -> Iterator[AudioPiece]:
        """Yields chunks as they are made. Bad text or voice raises before any audio."""
        with self.voices.backend.request():
            yield from self._synthesize(text, voice, options or SpeechOptions())

    def _synthesize(
        self, text: object, voice: str | None, options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        sentences = prepare(text, self.settings.config.text)
        chosen = self.voices.get(voice)
        rate = chosen.info.sample_rate
        gain = np.float32(options.volume)

        def scaled(samples: np.ndarray) -> np.ndarray:
            return samples * gain if gain != 1 else samples

        key = None
        if self.cache is not None:
            key = cache_key(
                {
                    "voice": chosen.identity(),
                    "sentences": sentences,
                    "options": {**asdict(options), "volume": None},
                }
            )
            hit = self.cache.get(key)
            if hit is not None and hit[0] == rate:
                for piece in hit[1]:
                    yield AudioPiece(scaled(piece.samples), piece.sentence_end, from_cache=True)
                return
        rendered: list[AudioPiece] = []
        for sentence in sentences:
            faults.hang_if_marked(sentence)
            for piece in chosen.synthesize_sentence(sentence, options):
                rendered.append(piece)
                yield AudioPiece(scaled(piece.samples), piece.sentence_end)
        if not rendered:
            raise TextError("the text holds nothing speakable")
        if self.cache is not None and key is not None:
            self.cache.put(key, rate, rendered)
