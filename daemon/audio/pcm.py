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


class SentenceLayout:
    """Where the pause between sentences goes as pieces are joined: one rule for the audio
    (`join_sentences`) and for anything timed against it (captions)."""

    def __init__(self) -> None:
        self.starts_sentence, self.paused = True, True

    def place(self, piece: AudioPiece) -> tuple[bool, bool]:
        """(a pause goes before this piece, it starts a sentence)."""
        if piece.silence:
            self.starts_sentence, self.paused = True, True
            return False, True
        placed = (self.starts_sentence and not self.paused, self.starts_sentence)
        self.starts_sentence, self.paused = piece.sentence_end, False
        return placed


def pause_samples(sample_rate: int, pause_s: float) -> int:
    return int(sample_rate * pause_s)


def join_sentences(
    pieces: Iterable[AudioPiece], sample_rate: int, pause_s: float, fade_ms: float
) -> Iterator[np.ndarray]:
    """Pieces of sentences as one stream: a sentence fades in and out, pieces inside a sentence
    join untouched, and `pause_s` of silence separates sentences, unless the text asked for a
    silence of its own there."""
    pause = np.zeros(pause_samples(sample_rate, pause_s), dtype=np.float32)
    layout = SentenceLayout()
    for piece in pieces:
        pause_before, starts_sentence = layout.place(piece)
        if piece.silence:
            if piece.samples.size:
                yield piece.samples
            continue
        if pause_before and pause.size:
            yield pause
        yield fade_edges(piece.samples, sample_rate, fade_ms, starts_sentence, piece.sentence_end)


def to_int16(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1.0, 1.0) * INT16_MAX).astype(np.int16)
