"""16-bit mono WAV: files written as audio arrives and renamed into place, or bytes in memory."""

from __future__ import annotations

import io
import os
import tempfile
import wave
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from daemon.audio.pcm import to_int16


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
    directory = path.parent if str(path.parent) else Path(".")
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=directory)
    try:
        with os.fdopen(handle, "wb") as raw:
            frames = _write(raw, blocks, sample_rate)
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return frames


def wav_bytes(blocks: Iterable[np.ndarray], sample_rate: int) -> bytes:
    buffer = io.BytesIO()
    _write(buffer, blocks, sample_rate)
    return buffer.getvalue()
