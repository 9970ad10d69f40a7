"""One TensorRT engine from one ONNX graph, with the TensorRT 10 (and later) Python API.

FP16: where the builder still has the weakly typed FP16 flag (TensorRT 10), the fp32 graph is
built with it, and the layer types that overflow in half precision (softmax, normalisation,
reductions, exp/log/pow/sqrt) are pinned to fp32 with precision constraints obeyed. Where the
flag is gone (TensorRT 11), the graph is the fp16-typed copy (same layers kept in fp32 by the
converter) and the network is strongly typed: TensorRT runs exactly the types it reads.

The timing cache is loaded before and saved after every build, so a rebuild after a config
change or an upgrade reuses the kernel timings measured before. The builder reports its phases
to `progress` (a Jetson build takes minutes; the service turns these into systemd STATUS=).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.box.files import replaced_atomically
from daemon.errors import BackendError
from daemon.runtime.profiles import Profile

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class EngineRequest:
    onnx_fp32: Path
    onnx_fp16: Path | None  # the fp16-typed copy, for a strongly typed build
    precision: str  # fp16 | fp32
    profiles: list[Profile]
    workspace_bytes: int
    optimization_level: int
    timing_cache: Path
    label: str
    device: int = 0


@dataclass(frozen=True)
class EngineFacts:
    """What the manifest records about a built engine."""

    tensorrt: str
    typing: str  # "strong" or "weak"
    weights_bytes: int
    profiles: list[dict[str, Any]]  # index, max_dims, device_memory_bytes, io_bytes, shapes
    build_s: float


def fp16_flag_available(trt) -> bool:
    return hasattr(trt.BuilderFlag, "FP16")


def build_engine(request: EngineRequest, out: Path, progress: Progress) -> EngineFacts:
    """Writes the serialized engine to `out` (atomically) and returns its facts."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    strong = request.precision == "fp16" and not fp16_flag_available(trt)
    if strong and request.onnx_fp16 is None:
        raise BackendError(f"{request.label}: TensorRT {trt.__version__} needs an fp16 graph")
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED) if strong else 0
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    graph = request.onnx_fp16 if strong else request.onnx_fp32
    assert graph is not None
    if not parser.parse_from_file(str(graph)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendError(f"{request.label}: TensorRT cannot parse {graph.name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, request.workspace_bytes)
    config.builder_optimization_level = request.optimization_level
    if request.precision == "fp16" and not strong:
        config.set_flag(trt.BuilderFlag.FP16)
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        kept = keep_overflowing_layers_fp32(trt, network)
        log.info("%s: %d layers kept in fp32", request.label, kept)
    for profile in request.profiles:
        shapes = builder.create_optimization_profile()
        for spec in profile.inputs:
            shapes.set_shape(spec.name, spec.min, spec.opt, spec.max)
        config.add_optimization_profile(shapes)
    cache_bytes = request.timing_cache.read_bytes() if request.timing_cache.is_file() else b""
    timing_cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(timing_cache, ignore_mismatch=False)
    monitor = _progress_monitor(trt, request.label, progress)
    config.progress_monitor = monitor
    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BackendError(f"{request.label}: TensorRT could not build an engine (see the log)")
    build_s = time.perf_counter() - started
    with replaced_atomically(out) as temp:
        temp.write(memoryview(serialized))
    with replaced_atomically(request.timing_cache) as temp:
        temp.write(memoryview(config.get_timing_cache().serialize()))
    facts = _inspect(trt, logger, out, request, serialized.nbytes)  # IHostMemory has no len()
    return EngineFacts(
        tensorrt=trt.__version__,
        typing="strong" if strong else "weak",
        weights_bytes=facts["weights_bytes"],
        profiles=facts["profiles"],
        build_s=round(build_s, 1),
    )


def keep_overflowing_layers_fp32(trt, network) -> int:
    """Pins the layers whose fp16 result can overflow or lose everything to fp32."""
    unary = trt.UnaryOperation
    # Exp/log/sqrt/reciprocal overflow; HiFT's Snake (1/alpha, sine) saturates and its source
    # phase is a cumulative sum of small increments.
    risky_unary = {unary.EXP, unary.LOG, unary.SQRT, unary.RECIP, unary.SIN, unary.COS}
    risky_elementwise = {trt.ElementWiseOperation.POW, trt.ElementWiseOperation.DIV}
    kinds = trt.LayerType
    # CUMULATIVE (CumSum) came after 10.3, JetPack 6's TensorRT: there the parser has no such
    # layer to pin.
    risky_kinds = {kinds.SOFTMAX, kinds.NORMALIZATION, kinds.REDUCE}
    risky_kinds |= {kind for kind in [getattr(kinds, "CUMULATIVE", None)] if kind is not None}
    count = 0
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        risky = layer.type in risky_kinds
        if layer.type == kinds.UNARY:
            layer.__class__ = trt.IUnaryLayer
            risky = layer.op in risky_unary
        elif layer.type == kinds.ELEMENTWISE:
            layer.__class__ = trt.IElementWiseLayer
            risky = layer.op in risky_elementwise
        if not risky:
            continue
        layer.precision = trt.float32
        for output in range(layer.num_outputs):
            if layer.get_output_type(output) in (trt.float16, trt.float32):
                layer.set_output_type(output, trt.float32)
        count += 1
    return count


def _progress_monitor(trt, label: str, progress: Progress):
    class Monitor(trt.IProgressMonitor):
        """The builder's phases, passed on at most every 2 s (a phase may have many steps)."""

        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.steps: dict[str, int] = {}
            self.last = 0.0

        def phase_start(self, phase_name, parent_phase, num_steps):
            self.steps[phase_name] = num_steps
            progress(f"{label}: {phase_name}")

        def step_complete(self, phase_name, step):
            now = time.monotonic()
            if now - self.last >= 2.0:
                self.last = now
                progress(f"{label}: {phase_name} {step + 1}/{self.steps.get(phase_name, '?')}")
            return True  # False would cancel the build

        def phase_finish(self, phase_name):
            self.steps.pop(phase_name, None)

    return Monitor()


def _inspect(trt, logger, path: Path, request: EngineRequest, size: int) -> dict[str, Any]:
    """Per profile: a context's device memory and the I/O bytes at the largest shapes."""
    from daemon.runtime.cuda import Cuda

    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(path.read_bytes())
    if engine is None:
        raise BackendError(f"{request.label}: the engine just built does not deserialize")
    weights = size
    stat = getattr(trt, "EngineStat", None)  # not in 10.3: the serialized size stands in
    if stat is not None:
        weights = int(engine.get_engine_stat(stat.TOTAL_WEIGHTS_SIZE))
    cuda = Cuda(request.device)
    stream = cuda.stream()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    profiles = []
    for profile in request.profiles:
        context = engine.create_execution_context(
            trt.ExecutionContextAllocationStrategy.USER_MANAGED
        )
        if not context.set_optimization_profile_async(profile.level, int(stream)):
            raise BackendError(f"{request.label}: TensorRT refused profile {profile.level}")
        cuda.synchronize(stream)
        io_bytes = 0
        for spec in profile.inputs:
            if not context.set_input_shape(spec.name, spec.max):
                raise BackendError(f"{request.label}: TensorRT refused shape {spec.max}")
        for name in names:
            shape = tuple(context.get_tensor_shape(name))
            itemsize = trt.nptype(engine.get_tensor_dtype(name))().itemsize
            if all(dim >= 0 for dim in shape):
                count = 1
                for dim in shape:
                    count *= dim
                io_bytes += count * itemsize
        memory = engine.get_device_memory_size_for_profile_v2(profile.level)
        profiles.append(
            {
                "index": profile.level,
                "max_dims": profile.max_dims,
                "device_memory_bytes": int(memory),
                # Outputs whose size depends on the data are not counted (they are allocated
                # as TensorRT asks, at run time).
                "io_bytes": io_bytes,
                "shapes": profile.as_dict()["inputs"],
            }
        )
    return {"weights_bytes": weights, "profiles": profiles}
