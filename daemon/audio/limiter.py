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
            gains = _window_means(_window_mins(self._needed, self.length), self.length)
            out = out * gains[:ready]
        self._pending = self._pending[ready:]
        self._needed = self._needed[ready:]
        return out


def _window_mins(values: np.ndarray, length: int) -> np.ndarray:
    """The minimum of every run of `length` values, in log2(length) passes over the audio (a
    sliding window's reduction costs `length` operations per sample: a tenth of a sentence's
    synthesis)."""
    mins, span = values, 1
    while span * 2 <= length:  # mins[i]: the minimum of values[i : i + span]
        mins, span = np.minimum(mins[:-span], mins[span:]), span * 2
    count = len(values) - length + 1
    return np.minimum(mins[:count], mins[length - span : length - span + count])


def _window_means(values: np.ndarray, length: int) -> np.ndarray:
    """The mean of every run of `length` values (running sums in float64: no drift)."""
    sums = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    return ((sums[length:] - sums[:-length]) / length).astype(np.float32)
