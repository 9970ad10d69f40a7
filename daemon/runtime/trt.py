"""Native TensorRT engines (backend `trt`), built on this box by `fastvoice build`.

An engine is deserialized straight from a memory map of its file (no copy into Python). Its
manifest says, per optimisation profile, how much device memory a context needs; the VRAM ledger
picks the largest profile that fits before anything touches the GPU. Each lane (one per
concurrent run) has a CUDA stream and one scratch block that the contexts of every stage in that
lane share (a lane runs one stage at a time), allocated here, not by TensorRT
(`USER_MANAGED`). Inputs go through pinned host buffers and async copies on the lane's stream;
outputs, whose size may depend on the data (a VITS encoder's frames), are allocated by an output
allocator as TensorRT asks. A failed device allocation is a GpuOutOfMemory: the batch is halved
and retried; at batch 1 a VITS decoder takes smaller windows (daemon/voices/vits.py), and below
its smallest the request fails and the service goes on.

TensorRT (10 or later) and cuda-python are imported only when this backend is used. Which engine
a stage loads is daemon.runtime.trt_engines; the buffers, lanes and readers it runs with are
daemon.runtime.trt_memory.
"""

from __future__ import annotations

import logging
import mmap
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from daemon.config import GpuConfig
from daemon.errors import BackendError
from daemon.parts import WHOLE, part_label
from daemon.runtime.artifacts import Artifact
from daemon.runtime.base import Backend, Precision, Stage, StageReport, TensorSpec
from daemon.runtime.budget import ProfileCost, run_halving
from daemon.runtime.cuda import Cuda
from daemon.runtime.cuda_context import CudaContext
from daemon.runtime.gpu import GpuStack
from daemon.runtime.trt_engines import ENGINE_FILE, find_engine, profile_costs
from daemon.runtime.trt_memory import (
    GrowingBuffer,
    Lane,
    Lanes,
    mapped_reader_class,
    output_allocator_class,
)

log = logging.getLogger(__name__)


class TrtContext:
    """One stage's execution context in one lane, with its pinned and device I/O buffers."""

    def __init__(self, trt, engine, profile: int, lane: Lane, cuda: Cuda, allocator_class) -> None:
        context = engine.create_execution_context(
            trt.ExecutionContextAllocationStrategy.USER_MANAGED
        )
        if context is None:
            raise BackendError("TensorRT could not create an execution context")
        if not context.set_optimization_profile_async(profile, int(lane.stream)):
            raise BackendError(f"TensorRT refused optimisation profile {profile}")
        cuda.synchronize(lane.stream)
        self.context = context
        self.allocator = allocator_class(cuda)
        self.inputs_device: dict[str, GrowingBuffer] = {}
        self.pinned: dict[str, GrowingBuffer] = {}
        self.cuda = cuda
        for index in range(engine.num_io_tensors):
            name = engine.get_tensor_name(index)
            if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
                context.set_output_allocator(name, self.allocator)

    def bind_scratch(self, lane: Lane) -> None:
        self.context.set_device_memory(lane.scratch.pointer, lane.scratch.size)

    def pinned_for(self, name: str, nbytes: int) -> GrowingBuffer:
        buffer = self.pinned.setdefault(name, GrowingBuffer(self.cuda, host=True))
        buffer.ensure(nbytes)
        return buffer


class TrtStage(Stage):
    def __init__(
        self,
        trt,
        engine,
        profile: ProfileCost,
        lanes: Lanes,
        cuda: Cuda,
        report: StageReport,
        batched: set[str],
    ) -> None:
        """`batched`: the inputs whose first axis is the batch (halved on out-of-memory)."""
        self.trt = trt
        self.engine = engine
        self.profile = profile
        self.lanes = lanes
        self.cuda = cuda
        self.report = report
        self.limits = dict(profile.max_dims)
        allocator_class = output_allocator_class(trt)
        self.contexts = {
            lane.index: TrtContext(trt, engine, profile.index, lane, cuda, allocator_class)
            for lane in lanes.all
        }
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        is_input = {n: engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self.dtypes = {n: np.dtype(trt.nptype(engine.get_tensor_dtype(n))) for n in names}
        self.max_shapes = {
            n: tuple(engine.get_tensor_profile_shape(n, profile.index)[2])
            for n in names
            if is_input[n]
        }
        self.inputs = tuple(
            TensorSpec(n, str(self.dtypes[n]), tuple(engine.get_tensor_shape(n)))
            for n in names
            if is_input[n]
        )
        self.outputs = tuple(
            TensorSpec(n, str(self.dtypes[n]), tuple(engine.get_tensor_shape(n)))
            for n in names
            if not is_input[n]
        )
        self._batched = batched

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return run_halving(self._run_once, feeds, self._batched, self.report.stage)

    def _check_shape(self, name: str, shape: tuple[int, ...]) -> None:
        limit = self.max_shapes[name]
        if len(shape) != len(limit) or any(s > m for s, m in zip(shape, limit, strict=True)):
            raise BackendError(
                f"{self.report.stage}: input {name!r} of shape {shape} is outside the engine "
                f"profile's max {limit}; raise gpu.profiles (and the budget) and rebuild"
            )

    def _run_once(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        missing = [spec.name for spec in self.inputs if spec.name not in feeds]
        if missing:
            raise BackendError(f"{self.report.stage}: inputs {missing} were not given")
        with self.lanes.lane() as lane:
            state = self.contexts[lane.index]
            context, cuda = state.context, self.cuda
            state.bind_scratch(lane)
            for spec in self.inputs:
                # fp16/fp32 (and int) conversion at the boundary: the engine's own I/O types.
                array = np.ascontiguousarray(feeds[spec.name], dtype=self.dtypes[spec.name])
                self._check_shape(spec.name, array.shape)
                if not context.set_input_shape(spec.name, array.shape):
                    raise BackendError(f"{self.report.stage}: TensorRT refused shape {array.shape}")
                pinned = state.pinned_for(spec.name, array.nbytes)
                pinned.view(array.dtype, array.shape)[...] = array
                device = state.inputs_device.setdefault(spec.name, GrowingBuffer(cuda))
                device.ensure(array.nbytes)
                cuda.copy_async(device.pointer, pinned.pointer, array.nbytes, True, lane.stream)
                context.set_tensor_address(spec.name, device.pointer)
            state.allocator.failure = None
            if not context.execute_async_v3(int(lane.stream)):
                if state.allocator.failure is not None:
                    raise state.allocator.failure
                raise BackendError(f"{self.report.stage}: TensorRT could not enqueue the run")
            cuda.synchronize(lane.stream)
            if state.allocator.failure is not None:
                raise state.allocator.failure
            results = []
            for spec in self.outputs:
                shape = state.allocator.shapes[spec.name]
                dtype = self.dtypes[spec.name]
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                pinned = state.pinned_for(spec.name, nbytes)
                source = state.allocator.buffers[spec.name].pointer
                cuda.copy_async(pinned.pointer, source, nbytes, False, lane.stream)
                results.append((pinned, dtype, shape))
            cuda.synchronize(lane.stream)
            return [
                pinned.view(dtype, shape).astype(np.float32 if dtype == np.float16 else dtype)
                for pinned, dtype, shape in results
            ]


class TrtBackend(Backend):
    name = "trt"

    def __init__(
        self,
        gpu: GpuConfig,
        stack: GpuStack,
        context: CudaContext,
        artifact_store: Path,
        workers: int = 1,
    ) -> None:
        self.gpu = gpu
        self.stack = stack
        self.context = context
        self.ledger = context.ledger
        self.artifact_store = artifact_store
        self.workers = workers
        self._trt = None
        self._runtime = None
        self._cuda: Cuda | None = None
        self._lanes: Lanes | None = None
        self._lock = threading.Lock()

    def find(self, model_path: Path, part: str) -> tuple[Artifact | None, str]:
        return find_engine(self.artifact_store, model_path, part, self.gpu, self.stack)

    def has_part(self, model_path: Path, part: str, precision: Precision | None = None) -> bool:
        return self.find(model_path, part)[0] is not None

    def _start(self) -> tuple[Any, Any, Cuda, Lanes]:
        """The CUDA context (measured: it may turn out larger than set aside, and then nothing
        more fits), TensorRT and the lanes, on the first load."""
        with self._lock:
            if self._lanes is None:
                import tensorrt as trt

                self._cuda = self.context.cuda()
                self._trt = trt
                self._runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
                self._lanes = Lanes(self.workers, self._cuda)
            assert self._cuda is not None
            return self._trt, self._runtime, self._cuda, self._lanes

    def load(
        self, model_path: Path, stage: str, part: str = WHOLE, precision: Precision | None = None
    ) -> Stage:
        artifact, reason = self.find(model_path, part)
        if artifact is None:
            raise BackendError(reason)
        label = part_label(stage, part)
        manifest = artifact.manifest
        weights = int(manifest["weights_bytes"])
        profile = self.ledger.place_engine(label, weights, profile_costs(manifest))
        if profile is None:
            raise BackendError(f"{label}: over the GPU budget (see status/info gpu.decisions)")
        try:
            return self._load_placed(artifact, model_path, stage, label, profile)
        except Exception as error:  # TensorRT and CUDA raise their own types
            self.ledger.release(label, str(error))
            if isinstance(error, BackendError):
                raise
            raise BackendError(f"{label}: TensorRT could not load the engine: {error}") from error

    def _load_placed(
        self, artifact: Artifact, model_path: Path, stage: str, label: str, profile: ProfileCost
    ) -> TrtStage:
        """Deserializes the engine from a memory map (streamed through IStreamReaderV2 where
        TensorRT has it; on 10.3 TensorRT copies the mapped bytes whole) and makes its
        contexts, one per lane. The map is closed once the engine holds its own copy."""
        manifest = artifact.manifest
        trt, runtime, cuda, lanes = self._start()
        started = time.perf_counter()
        path = artifact.directory / ENGINE_FILE
        reader_class = mapped_reader_class(trt)
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if reader_class is None:
                engine = runtime.deserialize_cuda_engine(m)
            else:
                with lanes.lane() as lane:
                    reader = reader_class(m, cuda, lane.stream)
                    try:
                        engine = runtime.deserialize_cuda_engine(reader)
                    finally:
                        reader.release()  # the map can only close once no view of it is left
        if engine is None:
            raise BackendError(f"{label}: TensorRT could not deserialize {path}")
        with lanes.every_lane():
            for lane in lanes.all:
                lane.scratch.ensure(self.ledger.scratch_bytes)
            report = StageReport(
                stage=stage,
                backend=self.name,
                providers=(f"TensorRT {trt.__version__}",),
                model_path=str(model_path),
                load_s=time.perf_counter() - started,
                weights_bytes=int(manifest["weights_bytes"]),
                load_rss_bytes=0,
                workers=self.workers,
                precision=manifest["precision"],
                notes=(
                    f"engine {artifact.directory.name}",
                    f"profile {profile.index}: "
                    + ", ".join(f"{k} <= {v}" for k, v in sorted(profile.max_dims.items())),
                    f"execution memory {profile.execution_bytes} bytes, shared per lane",
                ),
            )
            batched = set(manifest.get("batch_inputs", ()))
            return TrtStage(trt, engine, profile, lanes, cuda, report, batched)
