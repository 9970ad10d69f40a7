"""The artifacts of a Kokoro voice: its graph (joined from the part packages) optimised once for
this CPU, with its weights in a file ONNX Runtime maps, shared by every Kokoro voice. The graph
is kept as published (dynamic int8); the precision variants and the GPU engine of the recipe are
not built for it yet."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.config import KokoroVoiceConfig
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.kokoro import STAGE, graph_path
from edge_build.artifact_writer import BuildResult
from edge_build.ort_optimize import build_ort_artifact

if TYPE_CHECKING:
    from edge_build.gpu_steps import GpuSteps


class KokoroBuilder:
    def __init__(self, name: str, config: KokoroVoiceConfig, store: Path) -> None:
        self.name = name
        self.config = config
        self.store = store

    def build_cpu(
        self, *, precision: str, force: bool, verify: bool, progress: Callable[[str], None]
    ) -> list[BuildResult]:
        started = time.perf_counter()
        graph = graph_path(self.store)
        backend = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        found = backend.find_artifact(graph)[0]
        problems = found.verify(sha256=True) if found is not None and verify else []
        if found is None or force or problems:
            progress(f"{STAGE}: optimising the graph for this CPU (for {self.name})")
            found = build_ort_artifact(graph, self.store, STAGE)
            status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
        else:
            status = "up to date"
        seconds = time.perf_counter() - started
        return [BuildResult(self.name, STAGE, status, found.directory, seconds)]

    def build_gpu(self, steps: GpuSteps) -> list[BuildResult]:
        return []

    def missing(self, precision: str) -> list[str]:
        graph = graph_path(self.store)
        backend = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        return [] if backend.find_artifact(graph)[0] is not None else [STAGE]
