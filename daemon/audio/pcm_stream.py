"""Audio sent back over MQTT as ordered PCM chunks, for speakers that cannot synthesize.

Each message is a 16-byte header then 16-bit little-endian mono samples. The header:
magic `FVPC`, version (1), channels, sample width in bytes, reserved (0), sample rate (u32 LE),
sequence number (u32 LE, from 0). A chunk with no samples ends the stream.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from daemon.audio.pcm import to_int16

MAGIC = b"FVPC"
VERSION = 1
HEADER = struct.Struct("<4sBBBBII")


@dataclass(frozen=True)
class PcmChunk:
    sample_rate: int
    sequence: int
    samples: np.ndarray  # int16

    @property
    def is_last(self) -> bool:
        return self.samples.size == 0


def encode_chunk(samples: np.ndarray, sample_rate: int, sequence: int) -> bytes:
    header = HEADER.pack(MAGIC, VERSION, 1, 2, 0, sample_rate, sequence)
    return header + to_int16(samples).astype("<i2").tobytes()


def decode_chunk(message: bytes) -> PcmChunk:
    if len(message) < HEADER.size:
        raise ValueError(f"PCM chunk of {len(message)} bytes is shorter than its header")
    magic, version, channels, width, _, rate, sequence = HEADER.unpack_from(message)
    if magic != MAGIC or version != VERSION or channels != 1 or width != 2:
        raise ValueError("not a fastvoice PCM chunk (magic, version or format differ)")
    return PcmChunk(rate, sequence, np.frombuffer(message[HEADER.size :], dtype="<i2"))
