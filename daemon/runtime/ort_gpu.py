"""ONNX Runtime on an NVIDIA GPU: `ort-cuda` (CUDA execution provider) and `ort-trt` (its
TensorRT provider, CUDA for what TensorRT does not take).

ONNX Runtime falls back to the CPU without an error when a provider cannot be used (the CPU
package installed instead of onnxruntime-gpu, a missing CUDA library): the providers a session
really got are checked after it is created, and a session that did not get its GPU provider is
refused, so the backend chain moves on and says why. Each session's arena is limited by the VRAM
ledger (`gpu_mem_limit`, grown only by what is asked: `kSameAsRequested`). The TensorRT
provider's engines and timing cache live under the artifact store, built for the same profile
shapes as the native engines; the engines' device memory is set aside at the graph's weights
and settled to what the session really took (NVML, before and after), and TensorRT's workspace
is carved out of the session's arena limit, so that both stay inside the budget.

The graphs are the raw (unoptimised) parts that `fastvoice build` splits out on a GPU box, so
that a long sentence streams here too; without them a voice loads its whole source graph.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from daemon.config import GpuConfig
from daemon.errors import BackendError, GpuOutOfMemory
from daemon.parts import WHOLE, part_label
from daemon.runtime.artifacts import Artifact, find_artifact
from daemon.runtime.base import Backend, Precision, Stage, StageReport, ort_specs
from daemon.runtime.budget import mb, run_halving
from daemon.runtime.cuda_context import CudaContext
from daemon.runtime.gpu import ORT_GPU_PROVIDERS
from daemon.runtime.ort_values import run_keeping
from daemon.runtime.profiles import is_batch_dim, profile_ladder

log = logging.getLogger(__name__)

PART_KIND = "onnx-part"  # a part of a source graph, as split, for the GPU backends
PART_OPTIONS = {"graph": "split, unoptimised"}
# How ONNX Runtime words a failed device allocation (BFC arena, CUDA, TensorRT provider).
OUT_OF_MEMORY = re.compile(
    r"out of memory|failed to allocate memory|available memory of \d+ is smaller|"
    r"cudaErrorMemoryAllocation",
    re.IGNORECASE,
)


def part_kind(part: str, precision: str = "fp32") -> str:
    kind = f"{PART_KIND}/{part}"
    return kind if precision == "fp32" else f"{kind}@{precision}"


def find_part(
    store: Path, model_path: Path, part: str, precision: str = "fp32"
) -> tuple[Artifact | None, str]:
    import onnx

    return find_artifact(
        store, model_path, part_kind(part, precision), PART_OPTIONS, f"onnx {onnx.__version__}"
    )


def verify_providers(session, wanted: str) -> tuple[str, ...]:
    """The session's providers, or BackendError when `wanted` is not among them: ONNX Runtime
    logs a warning and runs on the CPU instead."""
    providers = tuple(session.get_providers())
    if wanted not in providers:
        raise BackendError(
            f"asked ONNX Runtime for {wanted}, the session got {', '.join(providers)}"
        )
    return providers


class OrtGpuStage(Stage):
    """One session: ONNX Runtime serves overlapping runs on a GPU session itself."""

    def __init__(self, session, report: StageReport, device: int = 0) -> None:
        self._session = session
        self._device = device
        self.report = report
        self.inputs = ort_specs(session.get_inputs())
        self.outputs = ort_specs(session.get_outputs())
        self._batched = {
            spec.name
            for spec in self.inputs
            if spec.shape and isinstance(spec.shape[0], str) and is_batch_dim(spec.shape[0])
        }

    def _run_once(self, feeds: Mapping[str, Any], keep: Collection[str] = ()) -> list[Any]:
        try:
            if keep:
                return run_keeping(self._session, feeds, keep, "cuda", self._device)
            return self._session.run(None, dict(feeds))
        except Exception as error:  # ORT raises its own exception types from C++
            if OUT_OF_MEMORY.search(str(error)):
                raise GpuOutOfMemory(str(error)) from error
            raise BackendError(f"{self.report.stage}: inference failed: {error}") from error

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return run_halving(self._run_once, feeds, self._batched, self.report.stage)

    def run_kept(self, feeds: Mapping[str, Any], keep: Collection[str]) -> list[Any]:
        """Kept outputs stay on the GPU; no batch halving (a batch of one decoding step)."""
        return self._run_once(feeds, keep)


class OrtGpuBackend(Backend):
    """`ort-cuda` or `ort-trt` on device `gpu.device`, within the ledger's budget."""

    def __init__(
        self,
        name: str,
        gpu: GpuConfig,
        context: CudaContext,
        artifact_store: Path | None,
        available_providers: tuple[str, ...],
        workers: int = 1,
    ) -> None:
        """`available_providers`: what onnxruntime says it has (the GPU probe read it)."""
        if name not in ORT_GPU_PROVIDERS:
            raise ValueError(f"unknown ONNX Runtime GPU backend {name!r}")
        self.name = name  # type: ignore[misc]  # one class, two backend names
        self.provider = ORT_GPU_PROVIDERS[name]
        self.gpu = gpu
        self.context = context
        self.ledger = context.ledger
        self.artifact_store = artifact_store
        self.available_providers = available_providers
        self.workers = workers

    def _graph_precision(self) -> str:
        """The CUDA provider runs the fp16 copy; TensorRT's provider converts fp32 itself."""
        return self.gpu.precision if self.name == "ort-cuda" else "fp32"

    def _graph(self, model_path: Path, part: str) -> tuple[Path, str, str]:
        """(graph, where it comes from, its precision): a part as `fastvoice build` made it; a
        whole graph as it is, or its copy where the build made one (CosyVoice 2's fp16,
        Kokoro's fp32 and fp16: its published graph is int8, which no GPU kernel runs)."""
        precision = self._graph_precision()
        if part == WHOLE:
            copy = None
            if self.artifact_store is not None:
                copy = find_part(self.artifact_store, model_path, WHOLE, precision)[0]
            if copy is None:
                return model_path, "whole source graph", "fp32"
            return copy.model, f"{precision} copy {copy.directory.name}", precision
        if self.artifact_store is None:
            raise BackendError("artifacts disabled: no split graph to load")
        artifact, reason = find_part(self.artifact_store, model_path, part, precision)
        if artifact is None:
            raise BackendError(reason)
        return artifact.model, f"split part {artifact.directory.name}", precision

    def has_part(self, model_path: Path, part: str, precision: Precision | None = None) -> bool:
        if self.artifact_store is None:
            return False
        found = find_part(self.artifact_store, model_path, part, self._graph_precision())
        return found[0] is not None

    def provider_options(self, arena_limit: int, graph: Path) -> list[tuple[str, dict[str, str]]]:
        """Under ort-trt, TensorRT's workspace is a share of the arena limit and the CUDA
        provider (for what TensorRT does not take) gets the rest: together, the limit."""
        workspace = int(arena_limit * self.gpu.workspace_fraction) if self.name == "ort-trt" else 0
        cuda = {
            "device_id": str(self.gpu.device),
            "gpu_mem_limit": str(arena_limit - workspace),
            "arena_extend_strategy": "kSameAsRequested",
            # Sentence lengths vary: an exhaustive search per new shape would stall each one.
            "cudnn_conv_algo_search": "HEURISTIC",
        }
        if self.name == "ort-cuda":
            return [(self.provider, cuda), ("CPUExecutionProvider", {})]
        cache = self.trt_cache_dir()
        profile = profile_ladder(graph, self.gpu)[0]
        trt = {
            "device_id": str(self.gpu.device),
            "trt_fp16_enable": "1" if self.gpu.precision == "fp16" else "0",
            "trt_max_workspace_size": str(workspace),
            "trt_builder_optimization_level": str(self.gpu.builder_optimization_level),
            "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": str(cache / "engines"),
            "trt_timing_cache_enable": "1",
            "trt_timing_cache_path": str(cache),
            **profile.ort_trt_options(),
        }
        return [(self.provider, trt), ("CUDAExecutionProvider", cuda), ("CPUExecutionProvider", {})]

    def trt_cache_dir(self) -> Path:
        if self.artifact_store is None:
            raise BackendError("ort-trt keeps its engines in the artifact store: enable artifacts")
        cache = self.artifact_store / "ort-trt-cache"
        (cache / "engines").mkdir(parents=True, exist_ok=True)
        return cache

    def _reserve_engines(self, label: str, weights: int) -> str:
        """The ledger entry for ort-trt's engines, set aside at the graph's weights (halved in
        fp16); the CUDA provider's weights sit inside its arena."""
        entry = f"{label} ort-trt engines"
        if self.name != "ort-trt":
            return entry
        estimate = weights // 2 if self.gpu.precision == "fp16" else weights
        why = (
            "set aside for the engines ONNX Runtime's TensorRT provider builds "
            f"({self.gpu.precision} weights) until measured"
        )
        if not self.ledger.reserve(entry, self.name, estimate, why):
            raise BackendError(f"{label}: over the GPU budget (see status/info gpu.decisions)")
        return entry

    def _settle_engines(self, label: str, entry: str, taken: int | None) -> None:
        if self.name != "ort-trt" or taken is None:
            return  # NVML cannot say: the estimate stands
        how = "measured when its session was made (device memory in use before and after)"
        if not self.ledger.settle(entry, self.name, taken, how):
            raise BackendError(f"its TensorRT engines took {mb(taken)}: over the GPU budget")

    def load(
        self, model_path: Path, stage: str, part: str = WHOLE, precision: Precision | None = None
    ) -> Stage:
        import onnxruntime as ort

        if self.provider not in self.available_providers:
            raise BackendError(
                f"this onnxruntime has no {self.provider} (it has: "
                f"{', '.join(self.available_providers)}); install onnxruntime-gpu in its place"
            )
        graph, source, graph_precision = self._graph(model_path, part)
        label = part_label(stage, part)
        weights = graph.stat().st_size
        engines = self._reserve_engines(label, weights)
        arena_limit = self.ledger.place_arena(label, self.name, weights)
        if arena_limit is None:
            self.ledger.release(engines, "its session is over the budget")
            raise BackendError(f"{label}: over the GPU budget (see status/info gpu.decisions)")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        started = time.perf_counter()
        try:
            self.context.ready_for_onnx_runtime()
            providers = self.provider_options(arena_limit, graph)
            session, taken = self.context.measure(
                lambda: ort.InferenceSession(str(graph), sess_options=options, providers=providers)
            )
            providers = verify_providers(session, self.provider)
            self._settle_engines(label, engines, taken)
        except Exception as error:
            self.ledger.release(label, str(error))
            self.ledger.release(engines, str(error))
            raise BackendError(f"{label}: {self.name} cannot load {graph.name}: {error}") from error
        report = StageReport(
            stage=stage,
            backend=self.name,
            providers=providers,
            model_path=str(model_path),
            load_s=time.perf_counter() - started,
            weights_bytes=weights,
            load_rss_bytes=0,
            workers=self.workers,
            precision=self.gpu.precision if self.name == "ort-trt" else graph_precision,
            notes=(f"onnxruntime {ort.__version__}", source, f"arena limit {arena_limit} bytes"),
        )
        return OrtGpuStage(session, report, self.gpu.device)
