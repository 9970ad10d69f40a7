"""16-bit mono WAV: files written as audio arrives and renamed into place, or bytes in memory."""

from __future__ import annotations

import io
import struct
import wave
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from daemon.audio.pcm import to_int16
from daemon.box.files import replaced_atomically


def _write(target: BinaryIO, blocks: Iterable[np.ndarray], sample_rate: int) -> int:
    frames = 0
    with wave.open(target, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        for block in blocks:
            wav.writeframes(to_int16(block).tobytes())
            frames += len(block)
    return frames


def write_wav(path: Path, blocks: Iterable[np.ndarray], sample_rate: int) -> int:
    """Writes float32 blocks; returns the number of frames. A failure leaves no partial file."""
    with replaced_atomically(path, mode=0o644) as raw:
        return _write(raw, blocks, sample_rate)


def wav_bytes(blocks: Iterable[np.ndarray], sample_rate: int) -> bytes:
    buffer = io.BytesIO()
    _write(buffer, blocks, sample_rate)
    return buffer.getvalue()


def streaming_header(sample_rate: int) -> bytes:
    """A WAV header for audio whose length is not known yet (sent as it is made): its sizes are
    the largest a RIFF file can give, which players read as "until the stream ends"."""
    unknown = 0xFFFFFFFF
    return b"".join(
        (
            b"RIFF",
            struct.pack("<I", unknown),
            b"WAVEfmt ",
            struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16),
            b"data",
            struct.pack("<I", unknown - 36),
        )
    )
