"""Silence around what a sink plays: `audio.lead_in_ms` before it, so an amplifier that wakes
on sound does not swallow the first syllable, and `audio.tail_ms` after it. (Not before a
timed start, which it would make late: the service gives those no lead-in.)"""

from __future__ import annotations

import numpy as np

from daemon.audio.sinks.base import Sink


class Padded:
    """`sink` with `lead_s` of silence before the first block and `tail_s` after the last."""

    def __init__(self, sink: Sink, lead_s: float, tail_s: float) -> None:
        self.sink = sink
        self._lead_s = lead_s
        self.tail_s = tail_s
        self._rate = 0

    @property
    def lead_s(self) -> float:
        return self.sink.lead_s + self._lead_s

    @property
    def opening_s(self) -> float:
        return self.sink.opening_s

    def open(self, rate: int, start_at: float | None) -> None:
        self._rate = rate
        self.sink.open(rate, start_at)
        if self._lead_s > 0:
            self.sink.write(np.zeros(round(rate * self._lead_s), np.float32))

    def write(self, block: np.ndarray) -> bool:
        return self.sink.write(block)

    def close(self, complete: bool) -> bool:
        if complete and self.tail_s > 0:
            complete = self.sink.write(np.zeros(round(self._rate * self.tail_s), np.float32))
        return self.sink.close(complete)
