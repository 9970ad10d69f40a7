"""The one unit audio moves in, from a voice through the phrase cache and the synthesizer to the
player and the publishers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AudioPiece:
    """Float32 mono samples in [-1, 1] at the voice's rate: a sentence, or a piece of one
    (`sentence_end` on its last piece); `from_cache` when it was not synthesized now; `silence`
    for a pause the text asked for (an SSML break), which stands in place of the pause between
    sentences."""

    samples: np.ndarray
    sentence_end: bool = True
    from_cache: bool = False
    silence: bool = False
