"""`fastvoice build`: make (or check) the artifacts of every configured voice for this box."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from daemon.config import Config
from daemon.runtime.artifacts import Artifact
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.vits import voice_files
from edge_build.ort_optimize import build_ort_artifact
from edge_build.vits_split import split_vits

PARTS = ("encoder", "decoder")


@dataclass(frozen=True)
class BuildResult:
    voice: str
    stage: str
    status: str
    directory: Path
    seconds: float


def build_voices(
    config: Config, store: Path, force: bool = False, verify: bool = False
) -> list[BuildResult]:
    backend = OrtCpuBackend(artifact_store=store)
    results = []
    for name, voice_config in sorted(config.voices.items()):
        model, _ = voice_files(name, voice_config)
        stage = f"{name}/vits"
        started = time.perf_counter()
        found = [backend.find_artifact(model, part)[0] for part in PARTS]
        if None in found:
            whole = backend.find_artifact(model)[0]  # a graph that does not split
            found = [whole] if whole is not None else found
        problems = [p for a in found if a is not None and verify for p in a.verify()]
        if None in found or force or problems:
            built = build_parts(model, store, stage)
            status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
        else:
            built, status = found, "up to date"
        for artifact in built:
            part = artifact.manifest["part"]
            seconds = time.perf_counter() - started
            results.append(
                BuildResult(name, f"{stage}/{part}", status, artifact.directory, seconds)
            )
    return results


def build_parts(model: Path, store: Path, stage: str) -> list[Artifact]:
    """Encoder and decoder when the graph splits (streaming inside a sentence), else the whole."""
    store.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store) as temp:
        parts = split_vits(model, Path(temp))
        if parts is None:
            return [build_ort_artifact(model, store, stage)]
        encoder, decoder = parts
        return [
            build_ort_artifact(model, store, stage, "encoder", encoder),
            build_ort_artifact(model, store, stage, "decoder", decoder),
        ]
