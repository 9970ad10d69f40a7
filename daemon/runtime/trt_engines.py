"""Which TensorRT engine a stage loads: the artifact kind and the options an engine is keyed by,
finding it (every file's checksum checked), its manifest checked against this box, and what each
of its optimisation profiles costs in device memory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.config import GpuConfig
from daemon.parts import part_kind
from daemon.runtime.artifacts import Artifact, find_artifact
from daemon.runtime.budget import ProfileCost
from daemon.runtime.gpu import GpuStack

ENGINE_KIND = "trt-engine"
ENGINE_FILE = "model.engine"


def engine_kind(part: str) -> str:
    return part_kind(ENGINE_KIND, part)


def engine_options(gpu: GpuConfig) -> dict[str, Any]:
    """Everything in the config an engine is built from: a change means a rebuild."""
    return {
        "precision": gpu.precision,
        "max_batch": gpu.max_batch,
        "profiles": {name: r.model_dump() for name, r in sorted(gpu.profiles.items())},
        "profile_levels": gpu.profile_levels,
        "builder_optimization_level": gpu.builder_optimization_level,
    }


def engine_library(tensorrt_version: str) -> str:
    return f"tensorrt {tensorrt_version}"


def find_engine(
    store: Path, model_path: Path, part: str, gpu: GpuConfig, stack: GpuStack
) -> tuple[Artifact | None, str]:
    """This part's engine for this TensorRT, GPU and config, with every file's checksum checked:
    a damaged engine must never reach the deserializer."""
    if stack.device is None or stack.tensorrt is None:
        return None, stack.device_problem or stack.tensorrt_problem
    artifact, reason = find_artifact(
        store,
        model_path,
        engine_kind(part),
        engine_options(gpu),
        engine_library(stack.tensorrt),
        machine=stack.device.identity(),
    )
    if artifact is None:
        return None, reason
    problem = engine_problem(artifact.manifest, stack)
    return (None, problem) if problem else (artifact, reason)


def engine_problem(manifest: Mapping[str, Any], stack: GpuStack) -> str:
    """Why an engine's manifest does not fit this box ('' when it does); the artifact key
    already tells these apart, so this catches a directory copied or renamed by hand."""
    device = stack.device
    built = manifest.get("tensorrt"), manifest.get("gpu"), manifest.get("compute_capability")
    here = (stack.tensorrt, *((device.name, device.compute_capability) if device else (None, None)))
    if built != here:
        return (
            f"engine built by TensorRT {built[0]} for {built[1]} (compute {built[2]}), this box "
            f"has TensorRT {here[0]} on {here[1]} (compute {here[2]}); rebuild it with "
            "`fastvoice build`"
        )
    if not manifest.get("profiles"):
        return "engine manifest lists no profiles; rebuild it with `fastvoice build`"
    return ""


def profile_costs(manifest: Mapping[str, Any]) -> list[ProfileCost]:
    """The manifest's profiles as the ledger weighs them, largest first."""
    return [
        ProfileCost(
            index=entry["index"],
            max_dims=entry["max_dims"],
            execution_bytes=entry["device_memory_bytes"],
            io_bytes=entry["io_bytes"],
        )
        for entry in sorted(manifest["profiles"], key=lambda e: e["index"])
    ]
