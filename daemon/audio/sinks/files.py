"""Files: a job's audio as a WAV file written whole when the job ends (`audio.file_dir` on a
box without speakers, `fastvoice say -o`), and raw PCM to a pipe as it is made (`say --raw`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

import numpy as np

from daemon.audio.pcm import to_int16
from daemon.audio.wav import write_wav
from daemon.errors import AudioDeviceError, FastvoiceError


class WavFileSink:
    """The WAV at `path`, written atomically once everything was written (nothing for a job cut
    short). `setting`: the config key that named its folder (a failure to write is then the
    box's output failing, named by that key)."""

    lead_s = 0.0
    opening_s = 0.0

    def __init__(self, path: Path, setting: str | None = None) -> None:
        self.path = path
        self.setting = setting
        self.frames = 0
        self._blocks: list[np.ndarray] = []
        self._rate = 0

    def open(self, rate: int, start_at: float | None) -> None:
        self._rate, self._blocks = rate, []

    def write(self, block: np.ndarray) -> bool:
        self._blocks.append(block)
        return True

    def close(self, complete: bool) -> bool:
        blocks, self._blocks = self._blocks, []
        if not complete:
            return False
        try:
            if self.setting is not None:  # the box's folder is made when missing
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.frames = write_wav(self.path, blocks, self._rate)
        except OSError as error:
            message = f"cannot write {self.path}: {error.strerror or error}"
            if self.setting is None:  # a file the user named
                raise FastvoiceError(message) from None
            raise AudioDeviceError(f"{self.setting}: {message}") from None
        return True


class RawPcmSink:
    """16-bit mono PCM to a pipe (stdout) as each block is made; a reader that goes away ends
    the writing quietly."""

    lead_s = 0.0
    opening_s = 0.0

    def __init__(self, out: BinaryIO | None = None) -> None:
        self.out = out or sys.stdout.buffer

    def open(self, rate: int, start_at: float | None) -> None:
        pass

    def write(self, block: np.ndarray) -> bool:
        try:
            self.out.write(to_int16(block).tobytes())
            self.out.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())
            return False
        return True

    def close(self, complete: bool) -> bool:
        return complete
