"""The artifacts of a CosyVoice 2 voice pack. On the CPU: each graph optimised for this CPU
(fp32: the pack's parity is proven at fp32). On a GPU box: the fp16 copy and the TensorRT engine
of the graphs that run most (the estimator, 20 runs a chunk, and the vocoder); the LLM step and
the flow encoder stay on ONNX Runtime (the LLM belongs to an LLM runtime; the encoder runs once a
chunk)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.config import CosyVoice2VoiceConfig
from daemon.errors import BackendError
from daemon.parts import WHOLE
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.voice_pack import GRAPHS, VoicePack, graph_file
from edge_build.artifact_writer import BuildResult
from edge_build.ort_optimize import build_ort_artifact

if TYPE_CHECKING:  # made by edge_build.build on a box with a GPU
    from edge_build.gpu_steps import GpuSteps

ENGINE_GRAPHS = ("flow_estimator", "flow_estimator_chunk", "hift_source", "hift_magnitude_phase")


class CosyVoice2Builder:
    def __init__(self, name: str, config: CosyVoice2VoiceConfig, store: Path) -> None:
        self.name = name
        self.store = store
        self.pack = VoicePack.open(config.pack)

    def build_cpu(
        self, *, precision: str, force: bool, verify: bool, progress: Callable[[str], None]
    ) -> list[BuildResult]:
        """With `verify`, the pack's own files are checked against its hashes too."""
        if verify:
            problems = self.pack.verify()
            if problems:
                raise BackendError(
                    f"voice {self.name!r}: {'; '.join(problems)} (export the pack again)"
                )
        backend = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        results = []
        for graph in GRAPHS:
            started = time.perf_counter()
            source = self.pack.path(graph_file(graph))
            stage = f"{self.name}/{graph}"
            found, _ = backend.find_artifact(source)
            problems = found.verify(sha256=True) if found is not None and verify else []
            if found is None or force or problems:
                progress(f"{stage}: optimising the graph for this CPU")
                found = build_ort_artifact(source, self.store, stage)
                status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
            else:
                status = "up to date"
            seconds = time.perf_counter() - started
            results.append(BuildResult(self.name, stage, status, found.directory, seconds))
        return results

    def build_gpu(self, steps: GpuSteps) -> list[BuildResult]:
        results = []
        for graph in ENGINE_GRAPHS:
            source = self.pack.path(graph_file(graph))
            where = {"voice": self.name, "stage": f"{self.name}/{graph}", "source": source}
            result, fp16 = steps.onnx_part(**where, part=WHOLE, graph=source, precision="fp16")
            results.append(result)
            if steps.engines:
                results.append(steps.engine(**where, part=WHOLE, graph=source, fp16=fp16.model))
        return results

    def missing(self, precision: str) -> list[str]:
        """What a CPU build would make now (a lookup finds only intact artifacts)."""
        fp32 = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        return [
            f"{self.name}/{graph}"
            for graph in GRAPHS
            if fp32.find_artifact(self.pack.path(graph_file(graph)))[0] is None
        ]
