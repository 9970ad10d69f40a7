"""Phrase cache: rendered speech on disk, bounded in size, least recently used evicted first.

An entry is keyed by everything that shapes the audio: the voice (its files and config), the
cleaned text and the speech options (volume is applied after the cache). Each file carries the
sha256 of its samples; a corrupt entry is deleted and treated as a miss, never played. When the
directory cannot be written the cache stops writing and says so; synthesis goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

from daemon.audio.piece import AudioPiece, WordTiming
from daemon.box.files import replaced_atomically

log = logging.getLogger(__name__)

MAGIC = b"FVC2"  # 2: word timings with each piece
SUFFIX = ".fvc"
_LENGTH = struct.Struct("<I")


def phrase_cache(config) -> PhraseCache | None:
    """The cache a config asks for (`cache.enabled`, `cache.dir`, `cache.max_mb`)."""
    from daemon.runtime.artifacts import cache_root

    if not config.enabled:
        return None
    return PhraseCache(config.dir or cache_root() / "phrases", config.max_bytes)


def cache_key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


class PhraseCache:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}
        try:
            directory.mkdir(parents=True, exist_ok=True)
            entries = sorted(directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime_ns)
            self._sizes = {path.stem: path.stat().st_size for path in entries}
        except OSError as error:
            self._disable(f"cannot use {directory}: {error.strerror or error}")

    @property
    def writable(self) -> bool:
        return self.problem is None

    def _disable(self, problem: str) -> None:
        self.problem = problem
        log.warning("phrase cache disabled for writing: %s", problem)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {
                "dir": str(self.directory),
                "entries": len(self._sizes),
                "bytes": sum(self._sizes.values()),
                "max_bytes": self.max_bytes,
                "hits": self.hits,
                "misses": self.misses,
                "problem": self.problem,
            }

    def get(self, key: str) -> tuple[int, list[AudioPiece]] | None:
        """(sample rate, pieces) of an intact entry; None on a miss or a corrupt entry."""
        path = self.directory / f"{key}{SUFFIX}"
        try:
            data = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        entry = _decode(data)
        if entry is None:
            log.warning("phrase cache entry %s is corrupt; dropped", path.name)
            self._remove(key)
            self.misses += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        with self._lock:
            self._sizes[key] = self._sizes.pop(key, len(data))
        self.hits += 1
        return entry

    def put(self, key: str, sample_rate: int, pieces: list[AudioPiece]) -> None:
        if not self.writable:
            return
        data = _encode(sample_rate, pieces)
        if len(data) > self.max_bytes:
            return
        try:
            with replaced_atomically(self.directory / f"{key}{SUFFIX}") as out:
                out.write(data)
        except OSError as error:
            self._disable(f"cannot write to {self.directory}: {error.strerror or error}")
            return
        with self._lock:
            self._sizes.pop(key, None)
            self._sizes[key] = len(data)
        self._evict()

    def resize(self, max_bytes: int) -> None:
        """A new bound (a reload): entries above it go at once, least recently used first."""
        self.max_bytes = max_bytes
        self._evict()

    def _evict(self) -> None:
        with self._lock:
            victims = []
            total = sum(self._sizes.values())
            for key, size in list(self._sizes.items()):
                if total <= self.max_bytes:
                    break
                victims.append(key)
                total -= size
        for key in victims:
            self._remove(key)

    def _remove(self, key: str) -> None:
        with self._lock:
            self._sizes.pop(key, None)
        (self.directory / f"{key}{SUFFIX}").unlink(missing_ok=True)


def _encode(sample_rate: int, pieces: list[AudioPiece]) -> bytes:
    payload = b"".join(p.samples.astype("<f4").tobytes() for p in pieces)
    header = json.dumps(
        {
            "sample_rate": sample_rate,
            "pieces": [
                [
                    len(p.samples),
                    p.sentence_end,
                    p.silence,
                    [[w.word, w.start_s, w.end_s] for w in p.words],
                ]
                for p in pieces
            ],
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
    ).encode()
    return MAGIC + _LENGTH.pack(len(header)) + header + payload


def _decode(data: bytes) -> tuple[int, list[AudioPiece]] | None:
    try:
        if data[:4] != MAGIC:
            return None
        (length,) = _LENGTH.unpack_from(data, 4)
        header = json.loads(data[8 : 8 + length])
        payload = data[8 + length :]
        if hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        samples = np.frombuffer(payload, dtype="<f4").astype(np.float32)
        pieces, offset = [], 0
        for count, sentence_end, silence, timed in header["pieces"]:
            piece = samples[offset : offset + count]
            words = tuple(WordTiming(str(w), float(s), float(e)) for w, s, e in timed)
            pieces.append(AudioPiece(piece, bool(sentence_end), silence=bool(silence), words=words))
            offset += count
        if offset != len(samples):
            return None
        return int(header["sample_rate"]), pieces
    except (ValueError, KeyError, TypeError, struct.error):
        return None
