"""The precision `auto` loads for a model on this box: the quality gate run once per box and
model (again when a variant was rebuilt), its verdict recorded beside the artifacts."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.base import Voice
from edge_build.artifact_writer import BuildResult
from edge_build.cpu_classes import CpuClass, this_cpu
from edge_build.ort_optimize import write_precision_choice
from edge_build.quality_gate import ASR_MISSING, ENGLISH, GateSet, evaluate


@dataclass
class Approximations:
    """What a gate of a voice family's own let the voice approximate (e.g. a VITS decoder's
    `context_frames`: empty when it failed), in one line, and its figures."""

    approximations: dict[str, Any]
    summary: str
    record: dict[str, Any] = field(default_factory=dict)


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
    gate_cpu: CpuClass | None = None,
    not_tried: dict[str, str] | None = None,
    approximate: Callable[[Voice], Approximations] | None = None,
) -> BuildResult:
    """The gate's choice among `candidates` for voice `name`'s `model` (`load` gives the voice
    at a precision), made now if there is none or `again`, else the one recorded.
    `gate_cpu`: the class whose candidates these are (recorded, with `not_tried`: why the
    class's other variants were not built). `approximate`: what else the chosen voice may
    approximate, judged by its own gate."""
    cpu = gate_cpu or this_cpu()
    started = time.perf_counter()
    choice = OrtCpuBackend(artifact_store=store).precision_choice(model)[0]
    recorded = choice.manifest if choice is not None else {}
    unjudged = approximate is not None and "approximated" not in recorded
    stale = _stale(recorded, gate, cpu, candidates)
    if choice is None or again or unjudged or stale:
        chosen, reason, verdicts = evaluate(load, candidates, gate)
        verdict = {
            "chosen": chosen,
            "reason": reason,
            "verdicts": [v.as_dict() for v in verdicts],
            "cpu_class": cpu.name,
            "not_tried": not_tried or {},
            "limits": gate.limits(),
            "pesq_measured": gate.pesq() is not None,
        }
        if approximate is not None:
            judged = approximate(load(chosen))
            verdict["reason"] = f"{reason}; {judged.summary}"
            verdict["approximations"] = judged.approximations
            verdict["approximated"] = judged.record
        # The verdict holds on this CPU: another's kernels may choose otherwise.
        verdict["reason"] += f"; on a CPU of class {cpu.describe()}"
        choice = write_precision_choice(model, store, stage, verdict)
        status = verdict["reason"]
    else:
        status = f"up to date: {choice.manifest['reason']}"
    seconds = time.perf_counter() - started
    return BuildResult(name, f"{stage}/precision", status, choice.directory, seconds)


def _stale(recorded: dict, gate: GateSet, cpu: CpuClass, candidates: tuple[str, ...]) -> bool:
    """Whether a recorded choice is to be judged again: made under other limits (those decided
    in issue 54 came after earlier choices), before the pesq package or the ASR check it asks
    for were installed (the `gate` extra), or among other candidates (before the CPU classes,
    or as another class)."""
    other_limits = recorded.get("limits") != gate.limits()
    pesq_since = gate.asks_pesq() and not recorded.get("pesq_measured") and gate.pesq() is not None
    asr_since = ASR_MISSING in recorded.get("reason", "") and gate.transcriber() is not None
    other_candidates = recorded.get("cpu_class") != cpu.name or recorded.get("chosen") not in (
        "fp32",
        *candidates,
    )
    return other_limits or pesq_since or asr_since or other_candidates
