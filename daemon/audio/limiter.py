"""A look-ahead peak limiter for audio that arrives in pieces: after a voice's measured gain,
the few peaks above the ceiling are turned down smoothly instead of clipped, without waiting
for the sentence's end.

Each sample's gain is the mean, over the last `L` samples, of the smallest gain that any sample
in the next `L` needs: every sample's window includes itself, so no sample exceeds the ceiling,
and the gain moves over `L` samples (no clicks). The output lags the input by L - 1 samples,
held until the next piece or the last one.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

LOOKAHEAD_S = 0.005


class LookaheadLimiter:
    def __init__(self, sample_rate: int, ceiling: float) -> None:
        self.ceiling = ceiling
        self.length = max(1, int(sample_rate * LOOKAHEAD_S))
        # Gains needed by the samples not yet given out, and by the L - 1 given out before.
        self._needed = np.ones(self.length - 1, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def process(self, audio: np.ndarray, last: bool) -> np.ndarray:
        """The limited audio ready so far; with `last`, everything still held."""
        lag = self.length - 1
        peaks = np.abs(audio)
        needed = np.minimum(1.0, self.ceiling / np.maximum(peaks, 1e-12)).astype(np.float32)
        self._pending = np.concatenate([self._pending, audio.astype(np.float32)])
        self._needed = np.concatenate([self._needed, needed])
        if last:  # past the end nothing needs turning down
            self._needed = np.concatenate([self._needed, np.ones(lag, dtype=np.float32)])
        ready = max(0, len(self._needed) - 2 * lag)
        out = self._pending[:ready]
        if ready and self._needed.min() < 1.0:
            window_min = sliding_window_view(self._needed, self.length).min(axis=1)
            gains = sliding_window_view(window_min, self.length).mean(axis=1)
            out = out * gains[:ready]
        self._pending = self._pending[ready:]
        self._needed = self._needed[ready:]
        return out
