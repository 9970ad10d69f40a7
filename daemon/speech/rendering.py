"""A request's audio on its way, as the synthesizer hands it to an interface that answers
beside the queue (HTTP, Wyoming): what those adapters may hold of the synthesizer's work."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from daemon.speech.captions import WordClock


@dataclass
class Rendering:
    """See `Synthesizer.render`."""

    voice: str
    rate: int
    blocks: Iterator[np.ndarray]
    clock: WordClock  # the words of the blocks made so far, timed in them
