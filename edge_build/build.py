"""`fastvoice build`: make (or check) the artifacts of every configured voice for this box."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from daemon.config import Config
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.vits import voice_files
from edge_build.ort_optimize import build_ort_artifact


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
        artifact, _ = backend.find_artifact(model)
        status = "up to date"
        problems = artifact.verify() if artifact is not None and verify else []
        if artifact is None or force or problems:
            artifact = build_ort_artifact(model, store, stage)
            status = "rebuilt: " + "; ".join(problems) if problems else "built"
        results.append(
            BuildResult(name, stage, status, artifact.directory, time.perf_counter() - started)
        )
    return results
