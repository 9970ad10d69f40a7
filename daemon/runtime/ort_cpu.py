"""ONNX Runtime on the CPU, tuned for one utterance at a time on a small box.

Full graph optimisation, sequential execution, memory pattern on, intra-op threads equal to the
physical cores this process may use. Stock Piper uses a default session; these settings are
where the CPU backend earns its keep.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import psutil

from daemon.errors import BackendError
from daemon.runtime.artifacts import Artifact, find_artifact
from daemon.runtime.base import Backend, Stage, StageReport, TensorSpec

log = logging.getLogger(__name__)

PROVIDER = "CPUExecutionProvider"
# The artifact edge_build writes for this backend, and the options it is built with.
ARTIFACT_KIND = "ort-optimized-onnx"
ARTIFACT_OPTIONS = {"graph_optimization_level": "all", "weights": "external, memory-mapped"}
WHOLE = "whole"


def artifact_kind(part: str) -> str:
    """Artifacts may hold a whole graph or one part of it (e.g. a VITS encoder or decoder)."""
    return ARTIFACT_KIND if part == WHOLE else f"{ARTIFACT_KIND}/{part}"


def physical_cores_available() -> int:
    """Physical cores, capped by the CPUs this process is allowed to run on (cgroups, taskset)."""
    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:
        allowed = os.cpu_count() or 1
    return max(1, min(physical, allowed))


def _specs(args: list) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(a.name, a.type, tuple(a.shape)) for a in args)


class OrtCpuStage(Stage):
    def __init__(self, session, report: StageReport) -> None:
        self._session = session
        self.report = report
        self.inputs = _specs(session.get_inputs())
        self.outputs = _specs(session.get_outputs())

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        try:
            return self._session.run(None, dict(feeds))
        except Exception as error:  # ORT raises its own exception types from C++
            raise BackendError(f"{self.report.stage}: inference failed: {error}") from error


class OrtCpuBackend(Backend):
    name = "ort-cpu"

    def __init__(self, threads: int | None = None, artifact_store: Path | None = None) -> None:
        self.threads = threads or physical_cores_available()
        self.artifact_store = artifact_store

    def session_options(self, optimized: bool = False):
        """Full optimisation, unless the graph is an artifact that was optimised at build time."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            if optimized
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.enable_mem_pattern = True
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Each session has its own thread pool; a pool that spins after its run starves the next
        # session's (a VITS encoder then decoder, or parallel workers) on a small CPU.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        return options

    def find_artifact(self, model_path: Path, part: str = WHOLE) -> tuple[Artifact | None, str]:
        import onnxruntime as ort

        if self.artifact_store is None:
            return None, "artifacts disabled"
        kind = artifact_kind(part)
        return find_artifact(
            self.artifact_store, model_path, kind, ARTIFACT_OPTIONS, ort.__version__
        )

    def has_part(self, model_path: Path, part: str) -> bool:
        return self.find_artifact(model_path, part)[0] is not None

    def load(self, model_path: Path, stage: str, part: str = WHOLE) -> Stage:
        import onnxruntime as ort

        artifact, reason = self.find_artifact(model_path, part)
        if artifact is None and part != WHOLE:
            raise BackendError(f"{stage}: {reason}")
        if artifact is None and self.artifact_store is not None:
            log.warning("%s: %s; loading %s and optimising it now", stage, reason, model_path.name)
        graph = artifact.model if artifact is not None else model_path
        rss_before = psutil.Process().memory_info().rss
        started = time.perf_counter()
        try:
            session = ort.InferenceSession(
                str(graph),
                sess_options=self.session_options(optimized=artifact is not None),
                providers=[PROVIDER],
            )
        except Exception as error:
            raise BackendError(f"{stage}: cannot load {model_path}: {error}") from error
        load_s = time.perf_counter() - started
        providers = tuple(session.get_providers())
        if PROVIDER not in providers:
            raise BackendError(f"{stage}: asked for {PROVIDER}, ONNX Runtime gave {providers}")
        report = StageReport(
            stage=stage,
            backend=self.name,
            providers=providers,
            model_path=str(model_path),
            load_s=load_s,
            weights_bytes=sum(entry["size"] for entry in artifact.manifest["files"].values())
            if artifact is not None
            else graph.stat().st_size,
            load_rss_bytes=max(0, psutil.Process().memory_info().rss - rss_before),
            threads=self.threads,
            notes=(f"onnxruntime {ort.__version__}", reason),
        )
        return OrtCpuStage(session, report)
