"""Each voice's loudness as this box measured it (EBU R128, at `fastvoice build` or install),
read before any audio is made: a gain per speaker that brings every voice to one level, so that
switching voices does not jump in volume and a sentence can play from its first window (a
per-sentence peak normalisation must wait for the sentence's end).

Records live in the artifact store under `loudness/`, keyed by the model and its JSON as
loaded (path, size, mtime) and the settings that shape the audio: a replaced voice file or a
changed setting finds no record, and the voice falls back to Piper's peak normalisation.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.runtime.artifacts import source_identity

TARGET_LUFS = -20.0  # about the embedded voice's level under Piper's peak normalisation
CEILING = 10 ** (-1.0 / 20)  # -1 dBFS: the limiter's ceiling for gained audio
FOLDER = "loudness"
SINGLE = "single"  # the speaker key of a single-speaker voice


def record_path(store: Path, model: Path, voice_json: Path, settings: dict[str, Any]) -> Path:
    identity = {
        "model": source_identity(model),
        "json": source_identity(voice_json),
        "settings": settings,
        "target_lufs": TARGET_LUFS,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return store / FOLDER / f"{key}.json"


@dataclass(frozen=True)
class Loudness:
    """What was measured: integrated loudness (LUFS) and sample peak (dBFS) per speaker."""

    lufs: dict[str, float]
    peak_dbfs: dict[str, float]

    def gain(self, speaker: int | None) -> float | None:
        """The linear gain that brings the speaker to TARGET_LUFS; None if not measured."""
        lufs = self.lufs.get(SINGLE if speaker is None else str(speaker))
        return None if lufs is None else 10 ** ((TARGET_LUFS - lufs) / 20)

    def as_dict(self) -> dict[str, Any]:
        return {"target_lufs": TARGET_LUFS, "lufs": self.lufs, "peak_dbfs": self.peak_dbfs}


def read(path: Path) -> Loudness | None:
    """The record, or None where there is none or it cannot be read (peak normalisation then)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Loudness(
            {str(k): float(v) for k, v in data["lufs"].items()},
            {str(k): float(v) for k, v in data["peak_dbfs"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
