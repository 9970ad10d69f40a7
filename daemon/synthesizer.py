"""Text → sentences → voice → audio chunks, one sentence at a time so playback starts early."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from daemon.config import TextConfig
from daemon.errors import TextError
from daemon.text import prepare
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry


@dataclass(frozen=True)
class AudioChunk:
    """Float32 mono samples: a sentence, or a piece of one (`sentence_end` on its last piece)."""

    samples: np.ndarray
    sample_rate: int
    index: int
    text: str
    sentence_end: bool = True

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


class Synthesizer:
    def __init__(self, voices: VoiceRegistry, text_config: TextConfig) -> None:
        self.voices = voices
        self.text_config = text_config

    def synthesize(
        self, text: object, voice: str | None = None, options: SpeechOptions | None = None
    ) -> Iterator[AudioChunk]:
        """Yields chunks as they are made. Bad text or voice raises before any audio."""
        options = options or SpeechOptions()
        sentences = prepare(text, self.text_config)
        chosen = self.voices.get(voice)
        index = 0
        for sentence in sentences:
            for piece in chosen.synthesize_sentence(sentence, options):
                samples = piece.samples
                if options.volume != 1.0:
                    samples = samples * np.float32(options.volume)
                yield AudioChunk(
                    samples, chosen.info.sample_rate, index, sentence, piece.sentence_end
                )
                index += 1
        if index == 0:
            raise TextError("the text holds nothing speakable")
