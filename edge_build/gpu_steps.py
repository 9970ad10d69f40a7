"""The GPU steps of `fastvoice build`, shared by every voice family: a part's ONNX graphs for the
ONNX Runtime GPU backends (fp32, and fp16 with the overflow-prone ops kept in fp32), and its
TensorRT engine for this GPU, TensorRT version and config.

An engine is keyed by all of these: after a TensorRT upgrade, a new GPU or a config change the
lookup finds nothing, a new engine is built and the one it replaces is removed (engines are
large, and edge boxes' disks small). A damaged engine (its checksum differs) is rebuilt, never
loaded. A part TensorRT cannot parse or build is reported and left to ort-cuda; the build goes on.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config import GpuConfig
from daemon.errors import BackendError
from daemon.parts import part_label
from daemon.runtime.artifacts import MANIFEST, Artifact, artifact_key, machine_id
from daemon.runtime.gpu import GpuStack
from daemon.runtime.ort_gpu import PART_OPTIONS, find_part, part_kind
from daemon.runtime.profiles import graph_inputs, is_batch_dim, profile_ladder
from daemon.runtime.trt_engines import (
    ENGINE_FILE,
    engine_kind,
    engine_library,
    engine_options,
    find_engine,
)
from edge_build.artifact_writer import BuildResult, source_record, write_artifact
from edge_build.precision import GPU_FP32_OPS, make_variant
from edge_build.trt_engine import EngineFacts, EngineRequest, Progress

log = logging.getLogger(__name__)
MODEL_FILE = "model.onnx"
EngineBuilder = Callable[[EngineRequest, Path, Progress], EngineFacts]


@dataclass(frozen=True)
class GpuSteps:
    """What every GPU step of one build shares. `engine_builder` builds one engine (TensorRT's;
    a test passes a fake where no GPU is at hand)."""

    gpu: GpuConfig
    stack: GpuStack
    store: Path
    force: bool
    verify: bool
    progress: Progress
    engine_builder: EngineBuilder
    engines: bool  # whether engines are built at all (the backend and the stack allow them)

    def onnx_part(
        self, *, voice: str, stage: str, source: Path, part: str, graph: Path, precision: str
    ) -> tuple[BuildResult, Artifact]:
        """The graph of `part` at `precision`, written unless an intact one is there."""
        started = time.perf_counter()
        label = f"{part_label(stage, part)}/onnx" + ("" if precision == "fp32" else f"@{precision}")
        found, _ = find_part(self.store, source, part, precision)
        problems = found.verify(sha256=True) if found is not None and self.verify else []
        if found is not None and not self.force and not problems:
            return BuildResult(voice, label, "up to date", found.directory, 0.0), found
        import onnx

        kind = part_kind(part, precision)
        directory = self.store / artifact_key(
            source, kind, PART_OPTIONS, f"onnx {onnx.__version__}"
        )

        def write(work: Path) -> tuple[dict[str, str], dict[str, Any]]:
            if precision == "fp32":
                shutil.copyfile(graph, work / MODEL_FILE)
            else:
                make_variant(graph, precision, work / MODEL_FILE, keep_fp32_ops=GPU_FP32_OPS)
            return {"model": MODEL_FILE}, {}

        manifest = {
            "kind": kind,
            "stage": stage,
            "part": part,
            "precision": precision,
            "fp32_ops": list(GPU_FP32_OPS) if precision == "fp16" else [],
            "source": source_record(source),
            "onnx": onnx.__version__,
            "machine": machine_id(),
        }
        artifact = write_artifact(self.store, directory, manifest, write)
        status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
        return BuildResult(voice, label, status, directory, _since(started)), artifact

    # Over 60 lines: one build step and each way it can end (kept, built, refused, failed).
    def engine(
        self, *, voice: str, stage: str, source: Path, part: str, graph: Path, fp16: Path | None
    ) -> BuildResult:
        """This part's engine, built unless an intact one for this GPU, TensorRT and config is
        there; a part TensorRT cannot take is reported as not built (it runs on ort-cuda)."""
        stack, gpu = self.stack, self.gpu
        assert stack.device is not None and stack.tensorrt is not None, "engines need both"
        started = time.perf_counter()
        label = f"{part_label(stage, part)}/trt@{gpu.precision}"
        self.progress(f"{part_label(stage, part)}: checking the TensorRT engine")
        found, why = find_engine(self.store, source, part, gpu, stack)
        if found is not None and not self.force:
            return BuildResult(voice, label, "up to date", found.directory, 0.0)
        kind, options = engine_kind(part), engine_options(gpu)
        library = engine_library(stack.tensorrt)
        directory = self.store / artifact_key(
            source, kind, options, library, machine=stack.device.identity()
        )
        slug = f"{stack.device.name}-{stack.device.compute_capability}-{stack.tensorrt}"
        request = EngineRequest(
            onnx_fp32=graph,
            onnx_fp16=fp16,
            precision=gpu.precision,
            profiles=profile_ladder(graph, gpu),
            workspace_bytes=int(gpu.budget_bytes * gpu.workspace_fraction),
            optimization_level=gpu.builder_optimization_level,
            timing_cache=self.store / "trt-timing-cache" / f"{_safe(slug)}.cache",
            label=part_label(stage, part),
            device=gpu.device,
        )
        request.timing_cache.parent.mkdir(parents=True, exist_ok=True)

        def write(work: Path) -> tuple[dict[str, str], dict[str, Any]]:
            facts = self.engine_builder(request, work / ENGINE_FILE, self.progress)
            learnt = {
                "typing": facts.typing,
                "tensorrt": facts.tensorrt,
                "profiles": facts.profiles,
                "weights_bytes": facts.weights_bytes,
                "build_s": facts.build_s,
            }
            return {"engine": ENGINE_FILE}, learnt

        manifest = {
            "kind": kind,
            "stage": stage,
            "part": part,
            "precision": gpu.precision,
            "source": source_record(source),
            "gpu": stack.device.name,
            "compute_capability": stack.device.compute_capability,
            "options": options,
            "batch_inputs": [
                name for name, dims in graph_inputs(graph) if dims and _batch(dims[0])
            ],
        }
        try:
            built = write_artifact(self.store, directory, manifest, write)
        except BackendError as error:
            log.warning("%s: no engine: %s", label, error)
            return BuildResult(voice, label, f"not built: {error}", directory, _since(started))
        replaced = remove_replaced(self.store, directory, built.manifest)
        status = "built" if found is None and why.startswith("no artifact") else f"rebuilt: {why}"
        if self.force and found is not None:
            status = "rebuilt: forced"
        if replaced:
            status += f" (replaced {', '.join(replaced)})"
        return BuildResult(voice, label, status, directory, _since(started))


def remove_replaced(store: Path, kept: Path, manifest: dict[str, Any]) -> list[str]:
    """Removes the other engines of the same source and part (another TensorRT, GPU or config):
    the one just built replaces them. Returns what they were built by."""
    removed = []
    for candidate in store.iterdir():
        if candidate == kept or not (candidate / MANIFEST).is_file():
            continue
        try:
            other = json.loads((candidate / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        same = (
            other.get("kind") == manifest["kind"]
            and other.get("source", {}).get("path") == manifest["source"]["path"]
        )
        if same:
            removed.append(f"TensorRT {other.get('tensorrt')} on {other.get('gpu')}")
            shutil.rmtree(candidate, ignore_errors=True)
    return removed


def _batch(dim: int | str) -> bool:
    return isinstance(dim, str) and is_batch_dim(dim)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in text)


def _since(started: float) -> float:
    return time.perf_counter() - started
