"""The CPU artifact: a graph optimised once for this box, weights in a file ONNX Runtime maps.

Saving the fully optimised graph (ORT_ENABLE_ALL, including this CPU's layout transforms) with
its weights as external data means a later start skips optimisation entirely and the weights are
memory-mapped, not copied: faster start, less private memory, one mapping for every session of
the graph (the manifest lists where each weight lies in the file).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from daemon.errors import BackendError
from daemon.parts import WHOLE
from daemon.runtime.artifacts import Artifact, artifact_key, cpu_features, machine_id
from daemon.runtime.ort_cpu import ARTIFACT_OPTIONS, PRECISION_CHOICE_KIND, artifact_kind
from edge_build.artifact_writer import source_record, write_artifact

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
    `graph` holds) and write it with a manifest keyed by `source`."""
    import onnxruntime as ort

    kind = artifact_kind(part, precision)

    def optimise(work: Path) -> tuple[dict[str, str], dict[str, Any]]:
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
        build_s = round(time.perf_counter() - started, 3)
        learnt = {"build_s": build_s, "initializers": external_initializers(work / MODEL_FILE)}
        return {"model": MODEL_FILE, "weights": WEIGHTS_FILE}, learnt

    manifest = {
        "kind": kind,
        "stage": stage,
        "part": part,
        "precision": precision,
        "source": source_record(source),
        "onnxruntime": ort.__version__,
        "options": ARTIFACT_OPTIONS,
        "machine": machine_id(),
    }
    return write_artifact(store, _directory(store, source, kind), manifest, optimise)


def external_initializers(model: Path) -> list[list] | None:
    """Where each weight of `model` lies in WEIGHTS_FILE: [name, numpy dtype, shape, offset,
    length], so that a process maps the file once for all sessions of the graph; None when a
    weight lies elsewhere or has a type numpy lacks (each session then maps its own)."""
    import numpy as np
    import onnx
    from onnx import helper

    table: list[list] = []
    for tensor in onnx.load(str(model), load_external_data=False).graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = {entry.key: entry.value for entry in tensor.external_data}
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
        except (KeyError, TypeError):
            return None
        if where.get("location") != WEIGHTS_FILE or dtype.kind not in "biuf":
            return None
        offset, length = int(where.get("offset", 0)), int(where["length"])
        table.append([tensor.name, dtype.name, list(tensor.dims), offset, length])
    return table


def write_precision_choice(source: Path, store: Path, stage: str, verdict: dict) -> Artifact:
    """Records the quality gate's verdict for `source` (what `precision: auto` loads)."""
    import onnxruntime as ort

    manifest = {
        "kind": PRECISION_CHOICE_KIND,
        "stage": stage,
        "source": source_record(source),
        "onnxruntime": ort.__version__,
        "machine": machine_id(),
        "cpu_features": list(cpu_features()),
        **verdict,
    }
    directory = _directory(store, source, PRECISION_CHOICE_KIND)
    return write_artifact(store, directory, manifest, lambda _work: ({}, {}))


def _directory(store: Path, source: Path, kind: str) -> Path:
    import onnxruntime as ort

    return store / artifact_key(source, kind, ARTIFACT_OPTIONS, ort.__version__)
