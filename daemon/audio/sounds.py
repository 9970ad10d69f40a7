"""Sounds played before an announcement: built-in chimes made at run time (no files to ship) and
the operator's own WAV, FLAC or OGG files from `sounds.dir`.

Every sound is brought to the voice's rate and to a speech-like loudness, so that a chime is
neither a startle nor lost under the announcement that follows it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from daemon.errors import SoundError

NO_SOUND = "none"
FILE_SUFFIXES = (".wav", ".flac", ".ogg")
MAX_FILE_BYTES = 20_000_000
MAX_SOUND_S = 30.0
# Speech from a normalised voice sits around -20 dBFS RMS; a chime at that level with its
# peaks held below full scale sounds as loud as the voice after it.
TARGET_RMS = 0.1
PEAK_LIMIT = 0.9
ATTACK_S = 0.005


def _bell(frequency: float, seconds: float, rate: int) -> np.ndarray:
    """A struck-bell note: the fundamental with two soft overtones, a 5 ms attack and an
    exponential decay (the attack keeps the speaker from clicking)."""
    t = np.arange(round(seconds * rate), dtype=np.float32) / rate
    wave = (
        np.sin(2 * np.pi * frequency * t)
        + 0.3 * np.sin(2 * np.pi * 2 * frequency * t)
        + 0.1 * np.sin(2 * np.pi * 3 * frequency * t)
    )
    envelope = np.exp(-3.0 * t / seconds) * np.minimum(1.0, t / ATTACK_S)
    return (wave * envelope).astype(np.float32)


def _notes(notes: list[tuple[float, float]], rate: int) -> np.ndarray:
    return np.concatenate([_bell(frequency, seconds, rate) for frequency, seconds in notes])


# name → samples at a rate; each a tune people know from stations and public buildings.
BUILT_IN: dict[str, Callable[[int], np.ndarray]] = {
    "dingdong": lambda rate: _notes([(659.25, 0.55), (523.25, 0.9)], rate),
    "attention": lambda rate: _notes([(523.25, 0.35), (659.25, 0.35), (783.99, 0.8)], rate),
    "alarm": lambda rate: _notes([(880.0, 0.25), (659.25, 0.25)] * 4, rate),
}


def matched_loudness(samples: np.ndarray) -> np.ndarray:
    """At the voice's loudness (TARGET_RMS), with peaks below PEAK_LIMIT."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if rms == 0.0:
        return samples
    gain = TARGET_RMS / rms
    peak = float(np.max(np.abs(samples))) * gain
    if peak > PEAK_LIMIT:
        gain *= PEAK_LIMIT / peak
    return (samples * np.float32(gain)).astype(np.float32)


class SoundLibrary:
    """The built-in sounds and the files of `directory` (named by their stem); rendered once
    per name and rate, a file again when it changes."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._rendered: dict[tuple, np.ndarray] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        files = []
        if self.directory is not None and self.directory.is_dir():
            files = [p.stem for p in self.directory.iterdir() if p.suffix.lower() in FILE_SUFFIXES]
        return sorted(set(BUILT_IN) | set(files))

    def check(self, name: str) -> None:
        """Raises SoundError unless `name` is `none` or a sound that can be played."""
        if name != NO_SOUND:
            self._source(name)

    def identity(self, name: str) -> dict:
        """What a rendering depends on (the phrase cache keys on it)."""
        source = self._source(name)
        if isinstance(source, Path):
            stat = source.stat()
            return {"file": str(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        return {"built_in": name}

    def render(self, name: str, rate: int) -> np.ndarray:
        """The sound at `rate`, loudness matched; raises SoundError naming what is wrong."""
        key = (rate, name, *self.identity(name).values())
        with self._lock:
            if key not in self._rendered:
                source = self._source(name)
                if isinstance(source, Path):
                    self._rendered[key] = matched_loudness(_read_file(source, rate))
                else:
                    self._rendered[key] = matched_loudness(BUILT_IN[source](rate))
            return self._rendered[key]

    def _source(self, name: str) -> Path | str:
        if self.directory is not None:
            for suffix in FILE_SUFFIXES:
                path = self.directory / f"{name}{suffix}"
                if path.is_file():
                    return path
        if name in BUILT_IN:
            return name
        raise SoundError(f"unknown sound {name!r}; known: {', '.join(self.names())}, {NO_SOUND}")


def _read_file(path: Path, rate: int) -> np.ndarray:
    """A sound file as mono float32 at `rate`."""
    import soundfile
    import soxr

    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SoundError(f"sound file {path} is {size} bytes, above {MAX_FILE_BYTES}")
    try:
        info = soundfile.info(str(path))
        if info.duration > MAX_SOUND_S:
            raise SoundError(f"sound file {path} lasts {info.duration:.1f} s, above {MAX_SOUND_S}")
        samples, file_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise SoundError(f"cannot read sound file {path}: {error}") from None
    mono = samples.mean(axis=1, dtype=np.float32)
    if file_rate != rate:
        mono = soxr.resample(mono, file_rate, rate).astype(np.float32)
    return mono
