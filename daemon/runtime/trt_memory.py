"""Memory for TensorRT runs: device and pinned host buffers that grow to the largest size asked
for, lanes (a CUDA stream and a scratch block each), an engine file read chunk by chunk from its
memory map, and the allocator TensorRT asks for outputs whose size depends on the data."""

from __future__ import annotations

import ctypes
import mmap
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from daemon.errors import GpuOutOfMemory
from daemon.runtime.cuda import Cuda


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


def output_allocator_class(trt):
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
