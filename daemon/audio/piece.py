"""The one unit audio moves in, from a voice through the phrase cache and the synthesizer to the
player and the publishers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WordTiming:
    """A word as the voice says it: from `start_s` to `end_s`, seconds from the start of its
    sentence's audio (a pause after the word, at a comma, is not part of it)."""

    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class AudioPiece:
    """Float32 mono samples in [-1, 1] at the voice's rate: a sentence, or a piece of one
    (`sentence_end` on its last piece); `from_cache` when it was not synthesized now; `silence`
    for a pause the text asked for (an SSML break), which stands in place of the pause between
    sentences. A sentence's first piece carries the timings of the sentence's `words`, where
    the voice knows them (the words are timed before their audio is decoded)."""

    samples: np.ndarray
    sentence_end: bool = True
    from_cache: bool = False
    silence: bool = False
    words: tuple[WordTiming, ...] = ()
