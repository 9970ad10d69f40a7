"""`fastvoice build` on a GPU box: for each voice part, the raw split graphs (fp32, and fp16 with
the overflow-prone ops kept in fp32) that the ONNX Runtime GPU backends load, and a TensorRT
engine built for this GPU, TensorRT version and config. For a CosyVoice 2 voice: the fp16 copy
and the engine of its estimator and vocoder graphs (the pack holds the fp32 ones).

An engine is keyed by all of these: after a TensorRT upgrade, a new GPU or a config change the
lookup finds nothing, a new engine is built and the one it replaces is removed (engines are
large, and edge boxes' disks small). A damaged engine (its checksum differs) is rebuilt, never
loaded. A part TensorRT cannot parse or build is reported and left to ort-cuda; the build goes on.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.config import Config
from daemon.errors import BackendError
from daemon.runtime.artifacts import (
    MANIFEST,
    Artifact,
    artifact_key,
    file_entries,
    install,
    machine_id,
    new_build_directory,
    source_record,
    utc_now,
)
from daemon.runtime.gpu import GpuStack
from daemon.runtime.ort_gpu import PART_OPTIONS, find_part, part_kind
from daemon.runtime.profiles import graph_inputs, is_batch_dim, profile_ladder
from daemon.runtime.trt import (
    ENGINE_FILE,
    engine_kind,
    engine_library,
    engine_options,
    find_engine,
)
from daemon.voices.vits import voice_files
from daemon.voices.voice_pack import VoicePack, graph_file
from edge_build.build import BuildResult
from edge_build.precision import GPU_FP32_OPS, make_variant
from edge_build.trt_engine import EngineFacts, EngineRequest, Progress
from edge_build.vits_split import WHOLE, split_graphs

log = logging.getLogger(__name__)
MODEL_FILE = "model.onnx"
EngineBuilder = Callable[[EngineRequest, Path, Progress], EngineFacts]
# A CosyVoice 2 pack's graphs that get engines: the estimator (20 runs a chunk) and the
# vocoder. The LLM step and the flow encoder run on ONNX Runtime (the LLM belongs to an LLM
# runtime; the encoder runs once a chunk).
ENGINE_GRAPHS = ("flow_estimator", "flow_estimator_chunk", "hift_source", "hift_magnitude_phase")


def build_gpu_voices(
    config: Config,
    store: Path,
    stack: GpuStack,
    force: bool = False,
    verify: bool = False,
    progress: Progress | None = None,
    engine_builder: EngineBuilder | None = None,
) -> list[BuildResult]:
    """`engine_builder` builds one engine (default: TensorRT's; a test passes a fake where no
    GPU is at hand)."""
    if engine_builder is None:
        from edge_build.trt_engine import build_engine as engine_builder
    progress = progress or log.info
    want_engines = config.runtime.backend in ("auto", "trt") and stack.engines_possible
    results = []
    for name, voice_config in sorted(config.voices.items()):
        if voice_config.family == "cosyvoice2":
            assert voice_config.pack is not None
            pack = VoicePack.open(voice_config.pack)
            for graph in ENGINE_GRAPHS:
                source = pack.path(graph_file(graph))
                stage = f"{name}/{graph}"
                result, fp16 = ensure_part(
                    source, store, stage, WHOLE, source, "fp16", force, verify
                )
                results.append(result)
                if want_engines:
                    progress(f"{stage}: checking the TensorRT engine")
                    results.append(
                        ensure_engine(
                            config,
                            source,
                            store,
                            stage,
                            WHOLE,
                            source,
                            fp16.model,
                            stack,
                            force,
                            progress,
                            engine_builder,
                        )
                    )
            continue
        model, _ = voice_files(name, voice_config)
        stage = f"{name}/vits"
        store.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=store) as temp:
            graphs = split_graphs(model, Path(temp))
            for part, graph in graphs.items():
                fp16 = None
                if part != WHOLE:
                    for precision in ("fp32", "fp16"):
                        result, artifact = ensure_part(
                            model, store, stage, part, graph, precision, force, verify
                        )
                        results.append(result)
                        fp16 = artifact.model if precision == "fp16" else fp16
                if want_engines:
                    progress(f"{stage}/{part}: checking the TensorRT engine")
                    results.append(
                        ensure_engine(
                            config,
                            model,
                            store,
                            stage,
                            part,
                            graph,
                            fp16,
                            stack,
                            force,
                            progress,
                            engine_builder,
                        )
                    )
    return results


def ensure_part(
    model: Path,
    store: Path,
    stage: str,
    part: str,
    graph: Path,
    precision: str,
    force: bool,
    verify: bool,
) -> tuple[BuildResult, Artifact]:
    """The split graph of `part` at `precision`, written unless an intact one is there."""
    started = time.perf_counter()
    label = f"{stage}/{part}/onnx" + ("" if precision == "fp32" else f"@{precision}")
    found, _ = find_part(store, model, part, precision)
    problems = found.verify(sha256=True) if found is not None and verify else []
    if found is not None and not force and not problems:
        return BuildResult(stage, label, "up to date", found.directory, 0.0), found
    import onnx

    kind = part_kind(part, precision)
    library = f"onnx {onnx.__version__}"
    directory = store / artifact_key(model, kind, PART_OPTIONS, library)
    work = new_build_directory(store)
    try:
        if precision == "fp32":
            shutil.copyfile(graph, work / MODEL_FILE)
        else:
            make_variant(graph, precision, work / MODEL_FILE, keep_fp32_ops=GPU_FP32_OPS)
        manifest = {
            "format": 1,
            "kind": kind,
            "stage": stage,
            "part": part,
            "precision": precision,
            "fp32_ops": list(GPU_FP32_OPS) if precision == "fp16" else [],
            "source": source_record(model),
            "onnx": onnx.__version__,
            "machine": machine_id(),
            "created": utc_now(),
            "files": file_entries(work, {"model": MODEL_FILE}),
        }
        artifact = install(work, directory, manifest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
    return BuildResult(stage, label, status, directory, time.perf_counter() - started), artifact


def ensure_engine(
    config: Config,
    model: Path,
    store: Path,
    stage: str,
    part: str,
    graph: Path,
    fp16: Path | None,
    stack: GpuStack,
    force: bool,
    progress: Progress,
    engine_builder: EngineBuilder,
) -> BuildResult:
    """This part's engine, built unless an intact one for this GPU, TensorRT and config is
    there; a part TensorRT cannot take is reported as not built (it runs on ort-cuda)."""
    assert stack.device is not None and stack.tensorrt is not None
    gpu = config.gpu
    started = time.perf_counter()
    label = f"{stage}/{part}/trt@{gpu.precision}"
    found, why = find_engine(store, model, part, gpu, stack)
    if found is not None and not force:
        return BuildResult(stage, label, "up to date", found.directory, 0.0)
    kind = engine_kind(part)
    options = engine_options(gpu)
    directory = store / artifact_key(
        model, kind, options, engine_library(stack.tensorrt), machine=stack.device.identity()
    )
    slug = f"{stack.device.name}-{stack.device.compute_capability}-{stack.tensorrt}"
    request = EngineRequest(
        onnx_fp32=graph,
        onnx_fp16=fp16,
        precision=gpu.precision,
        profiles=profile_ladder(graph, gpu),
        workspace_bytes=int(gpu.budget_bytes * gpu.workspace_fraction),
        optimization_level=gpu.builder_optimization_level,
        timing_cache=store / "trt-timing-cache" / f"{_safe(slug)}.cache",
        label=f"{stage}/{part}",
        device=gpu.device,
    )
    request.timing_cache.parent.mkdir(parents=True, exist_ok=True)
    work = new_build_directory(store)
    try:
        facts = engine_builder(request, work / ENGINE_FILE, progress)
        manifest = {
            "format": 1,
            "kind": kind,
            "stage": stage,
            "part": part,
            "precision": gpu.precision,
            "typing": facts.typing,
            "source": source_record(model),
            "tensorrt": facts.tensorrt,
            "gpu": stack.device.name,
            "compute_capability": stack.device.compute_capability,
            "options": options,
            "profiles": facts.profiles,
            "weights_bytes": facts.weights_bytes,
            "batch_inputs": [
                name for name, dims in graph_inputs(graph) if dims and _batch(dims[0])
            ],
            "build_s": facts.build_s,
            "created": utc_now(),
            "files": file_entries(work, {"engine": ENGINE_FILE}),
        }
        install(work, directory, manifest)
    except BackendError as error:
        shutil.rmtree(work, ignore_errors=True)
        log.warning("%s: no engine: %s", label, error)
        return BuildResult(stage, label, f"not built: {error}", directory, _since(started))
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    replaced = remove_replaced(store, directory, manifest)
    status = "built" if found is None and why.startswith("no artifact") else f"rebuilt: {why}"
    if force and found is not None:
        status = "rebuilt: forced"
    if replaced:
        status += f" (replaced {', '.join(replaced)})"
    return BuildResult(stage, label, status, directory, _since(started))


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
