"""Sample-level helpers shared by every output: sentence joins and sample format."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from daemon.audio.piece import AudioPiece

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
    pieces: Iterable[AudioPiece], sample_rate: int, pause_s: float, fade_ms: float
) -> Iterator[np.ndarray]:
    """Pieces of sentences as one stream: a sentence fades in and out, pieces inside a sentence
    join untouched, and `pause_s` of silence separates sentences, unless the text asked for a
    silence of its own there."""
    pause = np.zeros(int(sample_rate * pause_s), dtype=np.float32)
    starts_sentence, paused = True, True
    for piece in pieces:
        if piece.silence:
            starts_sentence, paused = True, True
            if piece.samples.size:
                yield piece.samples
            continue
        if starts_sentence and not paused and pause.size:
            yield pause
        yield fade_edges(piece.samples, sample_rate, fade_ms, starts_sentence, piece.sentence_end)
        starts_sentence, paused = piece.sentence_end, False


def to_int16(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1.0, 1.0) * INT16_MAX).astype(np.int16)
