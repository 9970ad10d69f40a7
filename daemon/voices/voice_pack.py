"""The CosyVoice 2 voice pack: what `fastvoice export cosyvoice2` writes and the voice reads.

A directory with a manifest (`cosyvoice2.json`: format, model dimensions, each file's size,
sha256 and fast checksum, the speakers), the ONNX graphs, the lookup tables as .npy files
(memory-mapped: the text embedding of the real model alone is over 500 MB), the tokenizer as a
`tokenizers` JSON file, and one .npz of prompt data per speaker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daemon.errors import VoiceError
from daemon.runtime.artifacts import FAST_HASH, intact, sha256_file

MANIFEST = "cosyvoice2.json"
FORMAT = 1
TOKENIZER = "tokenizer.json"
SPEAKERS = "speakers"
# The graphs: the LLM as one step with its KV cache outside; the flow encoder whole and as a
# streamed chunk with lookahead; the flow-matching estimator whole and chunk-causal; HiFT's
# source and its filter up to magnitude and phase.
GRAPHS = (
    "llm_step",
    "flow_encoder",
    "flow_encoder_chunk",
    "flow_estimator",
    "flow_estimator_chunk",
    "hift_source",
    "hift_magnitude_phase",
)
# The tables: the Qwen text embedding, the speech-token embedding, the LLM's sos/eos and
# task-id embedding, the flow's speaker projection, and the flow's fixed start noise.
TABLES = (
    "text_embedding",
    "speech_embedding",
    "llm_embedding",
    "speaker_projection_weight",
    "speaker_projection_bias",
    "flow_noise",
)
# A speaker: the transcript of its prompt (text token ids), the prompt's speech tokens as the
# LLM and as the flow read them, its mel frames [frames, 80] and its speaker embedding.
SPEAKER_ARRAYS = (
    "prompt_text",
    "llm_prompt_tokens",
    "flow_prompt_tokens",
    "prompt_mel",
    "embedding",
)


def llm_cache_names(layers: int) -> tuple[list[str], list[str]]:
    """The LLM step graph's KV-cache inputs and outputs, key and value per layer."""
    pairs = [f"{kind}_{layer}" for layer in range(layers) for kind in ("key", "value")]
    return [f"past_{pair}" for pair in pairs], [f"present_{pair}" for pair in pairs]


@dataclass(frozen=True)
class SpeakerPrompt:
    prompt_text: np.ndarray
    llm_prompt_tokens: np.ndarray
    flow_prompt_tokens: np.ndarray
    prompt_mel: np.ndarray
    embedding: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in SPEAKER_ARRAYS}


def graph_file(name: str) -> str:
    return f"{name}.onnx"


def table_file(name: str) -> str:
    return f"{name}.npy"


def speaker_file(name: str) -> str:
    return f"{SPEAKERS}/{name}.npz"


@dataclass(frozen=True)
class VoicePack:
    directory: Path
    manifest: dict[str, Any]

    @classmethod
    def open(cls, directory: Path) -> VoicePack:
        """Reads and checks the manifest and that every file it lists is there, at its size and
        with its fast checksum (a pack exported before packs recorded one: its size only);
        `fastvoice build --verify` also checks their sha256."""
        path = directory / MANIFEST
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise VoiceError(
                f"{directory} is not a voice pack: it has no {MANIFEST} "
                "(make one with `fastvoice export cosyvoice2 MODEL_DIR OUT_DIR`)"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise VoiceError(f"{path}: unreadable: {error}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            found = manifest.get("format") if isinstance(manifest, dict) else None
            raise VoiceError(
                f"{path}: pack format {found!r}, this fastvoice reads format {FORMAT}; "
                "export the pack again"
            )
        pack = cls(directory, manifest)
        expected = [graph_file(g) for g in GRAPHS] + [table_file(t) for t in TABLES]
        expected += [TOKENIZER] + [speaker_file(s) for s in pack.speakers]
        files = manifest.get("files", {})
        for name in expected:
            if name not in files:
                raise VoiceError(f"{path}: the manifest does not list {name}")
        for name, entry in files.items():
            file = directory / name
            if not file.is_file():
                raise VoiceError(f"{directory}: {name} is missing")
            if file.stat().st_size != entry["bytes"]:
                raise VoiceError(
                    f"{directory}: {name} is {file.stat().st_size} bytes, the manifest says "
                    f"{entry['bytes']} (truncated or replaced: export the pack again)"
                )
            if FAST_HASH in entry and not intact(file, FAST_HASH, entry[FAST_HASH]):
                raise VoiceError(
                    f"{directory}: {name} is damaged (its {FAST_HASH} differs from the "
                    "manifest's): export the pack again"
                )
        return pack

    def verify(self) -> list[str]:
        """The files whose sha256 is not the manifest's."""
        return [
            f"{name}: sha256 differs from the manifest's"
            for name, entry in self.manifest["files"].items()
            if sha256_file(self.directory / name) != entry["sha256"]
        ]

    @property
    def speakers(self) -> list[str]:
        speakers = self.manifest.get("speakers")
        if not isinstance(speakers, list) or not speakers:
            raise VoiceError(f"{self.directory / MANIFEST}: no speakers")
        return speakers

    def path(self, name: str) -> Path:
        return self.directory / name

    def table(self, name: str) -> np.ndarray:
        return np.load(self.path(table_file(name)), mmap_mode="r")

    def speaker(self, name: str) -> SpeakerPrompt:
        with np.load(self.path(speaker_file(name))) as arrays:
            try:
                return SpeakerPrompt(**{key: arrays[key] for key in SPEAKER_ARRAYS})
            except KeyError as error:
                raise VoiceError(f"{self.directory}: speaker {name!r} lacks {error}") from None
