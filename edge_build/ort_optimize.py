"""The CPU artifact: a graph optimised once for this box, weights in a file ONNX Runtime maps.

Saving the fully optimised graph (ORT_ENABLE_ALL, including this CPU's layout transforms) with
its weights as external data means a later start skips optimisation entirely and the weights are
memory-mapped, not copied: faster start, less private memory, pages shared between sessions.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from daemon.errors import BackendError
from daemon.runtime.artifacts import (
    Artifact,
    artifact_key,
    file_entries,
    install,
    machine_id,
    new_build_directory,
    source_record,
    utc_now,
)
from daemon.runtime.ort_cpu import (
    ARTIFACT_OPTIONS,
    PRECISION_CHOICE_KIND,
    WHOLE,
    artifact_kind,
)

MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "model.weights"


def build_ort_artifact(
    source: Path,
    store: Path,
    stage: str,
    part: str = WHOLE,
    graph: Path | None = None,
    precision: str = "fp32",
) -> Artifact:
    """Optimise `graph` (default: `source`, or the `part` of it, or a lower-precision copy, that
    `graph` holds) and write it with a manifest keyed by `source`; the directory appears whole
    or not at all."""
    import onnxruntime as ort

    kind = artifact_kind(part, precision)
    directory, work = _work_directory(store, source, kind)
    try:
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session_options.log_severity_level = 3
        session_options.optimized_model_filepath = str(work / MODEL_FILE)
        session_options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", WEIGHTS_FILE
        )
        session_options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        started = time.perf_counter()
        try:
            ort.InferenceSession(
                str(graph or source), session_options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # ORT raises its own exception types from C++
            raise BackendError(f"{stage}: cannot optimise {source}: {error}") from error
        manifest = {
            "format": 1,
            "kind": kind,
            "stage": stage,
            "part": part,
            "precision": precision,
            "source": source_record(source),
            "onnxruntime": ort.__version__,
            "options": ARTIFACT_OPTIONS,
            "machine": machine_id(),
            "build_s": round(time.perf_counter() - started, 3),
            "created": utc_now(),
            "files": file_entries(work, {"model": MODEL_FILE, "weights": WEIGHTS_FILE}),
        }
        return install(work, directory, manifest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def write_precision_choice(source: Path, store: Path, stage: str, verdict: dict) -> Artifact:
    """Records the quality gate's verdict for `source` (what `precision: auto` loads)."""
    import onnxruntime as ort

    directory, work = _work_directory(store, source, PRECISION_CHOICE_KIND)
    manifest = {
        "format": 1,
        "kind": PRECISION_CHOICE_KIND,
        "stage": stage,
        "source": source_record(source),
        "onnxruntime": ort.__version__,
        "machine": machine_id(),
        "created": utc_now(),
        "files": {},
        **verdict,
    }
    try:
        return install(work, directory, manifest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _work_directory(store: Path, source: Path, kind: str) -> tuple[Path, Path]:
    """The artifact's final directory and a temporary one beside it to build in."""
    import onnxruntime as ort

    directory = store / artifact_key(source, kind, ARTIFACT_OPTIONS, ort.__version__)
    return directory, new_build_directory(store)
