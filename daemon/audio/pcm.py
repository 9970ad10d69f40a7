"""Sample-level helpers shared by every output: sentence joins and sample format."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

INT16_MAX = 32767


def _ramp(length: int) -> np.ndarray:
    return (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, length, dtype=np.float32))).astype(
        np.float32
    )


def fade_edges(
    samples: np.ndarray,
    sample_rate: int,
    fade_ms: float,
    fade_in: bool = True,
    fade_out: bool = True,
) -> np.ndarray:
    """Raised-cosine fades, so a sentence never starts or stops on a step (a click)."""
    length = min(int(sample_rate * fade_ms / 1000), len(samples) // 2)
    faded = samples.astype(np.float32, copy=True)
    if length == 0:
        return faded
    ramp = _ramp(length)
    if fade_in:
        faded[:length] *= ramp
    if fade_out:
        faded[-length:] *= ramp[::-1]
    return faded


def join_sentences(
    pieces: Iterable[tuple[np.ndarray, bool]], sample_rate: int, pause_s: float, fade_ms: float
) -> Iterator[np.ndarray]:
    """Pieces of sentences (samples, ends-a-sentence) as one stream: a sentence fades in and out,
    pieces inside a sentence join untouched, and `pause_s` of silence separates sentences."""
    pause = np.zeros(int(sample_rate * pause_s), dtype=np.float32)
    starts_sentence, first = True, True
    for samples, ends_sentence in pieces:
        if starts_sentence and not first and pause.size:
            yield pause
        yield fade_edges(samples, sample_rate, fade_ms, starts_sentence, ends_sentence)
        starts_sentence, first = ends_sentence, False


def to_int16(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1.0, 1.0) * INT16_MAX).astype(np.int16)
