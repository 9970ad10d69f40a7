"""The precision `auto` loads for a model on this box: the quality gate run once per box and
model (again when a variant was rebuilt), its verdict recorded beside the artifacts."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.base import Voice
from edge_build.artifact_writer import BuildResult
from edge_build.ort_optimize import write_precision_choice
from edge_build.quality_gate import ENGLISH, GateSet, evaluate


def settle_precision(
    name: str,
    stage: str,
    model: Path,
    store: Path,
    load: Callable[[str], Voice],
    candidates: tuple[str, ...],
    *,
    again: bool,
    gate: GateSet = ENGLISH,
) -> BuildResult:
    """The gate's choice among `candidates` for voice `name`'s `model` (`load` gives the voice
    at a precision), made now if there is none or `again`, else the one recorded."""
    started = time.perf_counter()
    choice = OrtCpuBackend(artifact_store=store).precision_choice(model)[0]
    if choice is None or again:
        chosen, reason, verdicts = evaluate(load, candidates, gate)
        verdict = {"chosen": chosen, "reason": reason, "verdicts": [v.as_dict() for v in verdicts]}
        choice = write_precision_choice(model, store, stage, verdict)
        status = reason
    else:
        status = f"up to date: {choice.manifest['reason']}"
    seconds = time.perf_counter() - started
    return BuildResult(name, f"{stage}/precision", status, choice.directory, seconds)
