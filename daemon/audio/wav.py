"""16-bit mono WAV files, written as audio arrives and renamed into place when complete."""

from __future__ import annotations

import os
import tempfile
import wave
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from daemon.audio.pcm import to_int16


def write_wav(path: Path, blocks: Iterable[np.ndarray], sample_rate: int) -> int:
    """Writes float32 blocks; returns the number of frames. A failure leaves no partial file."""
    directory = path.parent if str(path.parent) else Path(".")
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=directory)
    frames = 0
    try:
        with os.fdopen(handle, "wb") as raw, wave.open(raw, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            for block in blocks:
                wav.writeframes(to_int16(block).tobytes())
                frames += len(block)
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return frames
