"""Sample-level helpers shared by every output: sentence joins and sample format."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

INT16_MAX = 32767


def fade_edges(samples: np.ndarray, sample_rate: int, fade_ms: float) -> np.ndarray:
    """Raised-cosine fade in and out, so a sentence never starts or stops on a step (a click)."""
    length = min(int(sample_rate * fade_ms / 1000), len(samples) // 2)
    if length == 0:
        return samples
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, length, dtype=np.float32))).astype(
        np.float32
    )
    faded = samples.astype(np.float32, copy=True)
    faded[:length] *= ramp
    faded[-length:] *= ramp[::-1]
    return faded


def join_sentences(
    sentences: Iterable[np.ndarray], sample_rate: int, pause_s: float, fade_ms: float
) -> Iterator[np.ndarray]:
    """Faded sentences with `pause_s` of silence between them (none before the first)."""
    pause = np.zeros(int(sample_rate * pause_s), dtype=np.float32)
    for index, samples in enumerate(sentences):
        if index and pause.size:
            yield pause
        yield fade_edges(samples, sample_rate, fade_ms)


def to_int16(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1.0, 1.0) * INT16_MAX).astype(np.int16)
