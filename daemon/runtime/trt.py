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

TensorRT (10 or later) and cuda-python are imported only when this backend is used.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from daemon.config import GpuConfig
from daemon.errors import BackendError, GpuOutOfMemory
from daemon.parts import WHOLE, part_kind, part_label
from daemon.runtime.artifacts import Artifact, find_artifact
from daemon.runtime.base import Backend, Stage, StageReport, TensorSpec
from daemon.runtime.budget import ProfileCost, run_halving
from daemon.runtime.cuda import Cuda
from daemon.runtime.cuda_context import CudaContext
from daemon.runtime.gpu import GpuStack

log = logging.getLogger(__name__)

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


class GrowingBuffer:
    """Device (or pinned host) memory that grows to the largest size asked for, never shrinks."""

    def __init__(self, cuda: Cuda, host: bool = False) -> None:
        self.cuda = cuda
        self.host = host
        self.pointer = 0
        self.size = 0

    def ensure(self, size: int) -> int:
        if size > self.size:
            self.release()
            self.pointer = self.cuda.malloc_host(size) if self.host else self.cuda.malloc(size)
            self.size = size
        return self.pointer

    def view(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy array over pinned host memory (host buffers only)."""
        count = int(np.prod(shape, dtype=np.int64))
        raw = (ctypes.c_uint8 * self.size).from_address(self.pointer)
        return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)

    def release(self) -> None:
        if self.pointer:
            (self.cuda.free_host if self.host else self.cuda.free)(self.pointer)
        self.pointer, self.size = 0, 0


class Lane:
    """One run at a time: a stream and the scratch block its stages' contexts share."""

    def __init__(self, index: int, cuda: Cuda) -> None:
        self.index = index
        self.stream = cuda.stream()
        self.scratch = GrowingBuffer(cuda)


class Lanes:
    """The lanes of one backend; a run holds one for its whole duration."""

    def __init__(self, count: int, cuda: Cuda) -> None:
        self._free = [Lane(index, cuda) for index in range(count)]
        self.all = tuple(self._free)
        self._cond = threading.Condition()
        self._exclusive = threading.Lock()  # two every_lane() would each hold half the lanes

    def _take(self) -> Lane:
        with self._cond:
            while not self._free:
                self._cond.wait()
            return self._free.pop()

    def _give_back(self, lanes: list[Lane]) -> None:
        with self._cond:
            self._free.extend(lanes)
            self._cond.notify_all()

    @contextmanager
    def lane(self) -> Iterator[Lane]:
        lane = self._take()
        try:
            yield lane
        finally:
            self._give_back([lane])

    @contextmanager
    def every_lane(self) -> Iterator[tuple[Lane, ...]]:
        """All lanes at once (no run in flight): to grow the scratch blocks."""
        held: list[Lane] = []
        with self._exclusive:
            try:
                for _ in self.all:
                    held.append(self._take())
                yield self.all
            finally:
                self._give_back(held)


def capsule_pointer(capsule) -> int:
    """The address a PyCapsule holds (TensorRT hands read destinations over as capsules)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)) or 0)


class MappedChunks:
    """A memory-mapped file read chunk by chunk to any address (host or device: `copy` is
    Cuda.copy), with TensorRT's seek semantics; `origins` maps TensorRT's SeekPosition members
    to 'set', 'cur' and 'end'."""

    def __init__(self, mapped: mmap.mmap, copy, stream, origins: Mapping[Any, str]) -> None:
        self.source = np.frombuffer(mapped, dtype=np.uint8)  # a view: nothing is copied
        self.copy = copy
        self.stream = stream
        self.origins = origins
        self.offset = 0

    def read_into(self, address: int, num_bytes: int, stream) -> int:
        count = max(0, min(int(num_bytes), self.source.size - self.offset))
        if count:
            self.copy(address, self.source.ctypes.data + self.offset, count, stream or self.stream)
        self.offset += count
        return count

    def seek(self, offset: int, where) -> bool:
        origin = {"set": 0, "cur": self.offset, "end": self.source.size}[self.origins[where]]
        if not 0 <= origin + int(offset) <= self.source.size:
            return False
        self.offset = origin + int(offset)
        return True

    def release(self) -> None:
        """Drops the view: the map can only close once none is left."""
        self.source = np.zeros(0, dtype=np.uint8)


def mapped_reader_class(trt):
    """TensorRT's IStreamReaderV2 over a memory-mapped engine file (TensorRT 10.x releases after
    10.3, and 11.x): TensorRT asks for the engine chunk by chunk and each chunk is copied from
    the page cache straight to where TensorRT wants it (host or device memory), so the file is
    never read whole into the process. None where the bindings lack the interface (10.3)."""
    if not hasattr(trt, "IStreamReaderV2"):
        return None
    positions = trt.SeekPosition
    origins = {positions.SET: "set", positions.CUR: "cur", positions.END: "end"}

    class MappedEngineReader(trt.IStreamReaderV2):
        def __init__(self, mapped: mmap.mmap, cuda: Cuda, stream) -> None:
            trt.IStreamReaderV2.__init__(self)  # opens the CUDA driver
            self.chunks = MappedChunks(mapped, cuda.copy, stream, origins)

        def read(self, destination, num_bytes, stream):
            return self.chunks.read_into(capsule_pointer(destination), num_bytes, stream)

        def seek(self, offset, where):
            return self.chunks.seek(offset, where)

        def release(self) -> None:
            self.chunks.release()

    return MappedEngineReader


def _output_allocator_class(trt):
    """TensorRT's IOutputAllocator, defined once TensorRT is imported."""

    class OutputAllocator(trt.IOutputAllocator):
        """Device memory for outputs, grown to what TensorRT asks; a failed allocation is
        remembered so that the failed run reads as out of memory, not as a TensorRT error."""

        def __init__(self, cuda: Cuda) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffers: dict[str, GrowingBuffer] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}
            self.failure: GpuOutOfMemory | None = None
            self.cuda = cuda

        def reallocate_output(self, tensor_name, memory, size, alignment):
            return self.reallocate_output_async(tensor_name, memory, size, alignment, None)

        def reallocate_output_async(self, tensor_name, memory, size, alignment, stream):
            buffer = self.buffers.setdefault(tensor_name, GrowingBuffer(self.cuda))
            try:
                return buffer.ensure(int(size))
            except GpuOutOfMemory as error:
                self.failure = error
                return None

        def notify_shape(self, tensor_name, shape):
            self.shapes[tensor_name] = tuple(shape)

    return OutputAllocator


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
        allocator_class = _output_allocator_class(trt)
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

    def has_part(self, model_path: Path, part: str) -> bool:
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

    def load(self, model_path: Path, stage: str, part: str = WHOLE) -> Stage:
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
