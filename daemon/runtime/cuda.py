"""The few CUDA runtime calls fastvoice makes itself (through cuda-python), with CUDA's error
codes turned into exceptions: GpuOutOfMemory for a failed allocation, BackendError otherwise."""

from __future__ import annotations

import threading

from daemon.errors import BackendError, GpuOutOfMemory
from daemon.runtime.gpu import cuda_runtime

CUDA_SUCCESS = 0
CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation


class Cuda:
    """The few CUDA runtime calls used here, with errors turned into exceptions. The current
    device is a per-thread setting in CUDA: every call first makes `device` current on the
    calling thread (the lanes and TensorRT's output-allocator callbacks run on threads of
    their own; without this they would allocate on GPU 0)."""

    def __init__(self, device: int, runtime=None) -> None:
        """`runtime`: cuda-python's runtime module (a test passes a recording double)."""
        self.rt = runtime if runtime is not None else cuda_runtime()
        self.device = device
        self._thread = threading.local()
        self._call("cudaSetDevice", device)

    def _call(self, name: str, *args):
        if name != "cudaSetDevice" and getattr(self._thread, "device", None) != self.device:
            self._call("cudaSetDevice", self.device)
        try:
            result = getattr(self.rt, name)(*args)
        except RuntimeError as error:  # cuda-python raises where no driver can be loaded
            raise BackendError(f"{name}: {error}") from None
        values = self.check(result, name)
        if name == "cudaSetDevice":
            self._thread.device = self.device
        return values

    def check(self, result: tuple, call: str):
        error, *values = result if isinstance(result, tuple) else (result,)
        code = int(error)
        if code != CUDA_SUCCESS:
            name = self.rt.cudaGetErrorName(error)[1]
            text = name.decode() if isinstance(name, bytes) else str(name)
            if code == CUDA_OUT_OF_MEMORY:
                raise GpuOutOfMemory(f"{call}: {text}")
            raise BackendError(f"{call}: {text}")
        return values[0] if len(values) == 1 else values

    def malloc(self, size: int) -> int:
        return int(self._call("cudaMalloc", max(1, size)))

    def free(self, pointer: int) -> None:
        self._call("cudaFree", pointer)

    def malloc_host(self, size: int) -> int:
        return int(self._call("cudaMallocHost", max(1, size)))

    def free_host(self, pointer: int) -> None:
        self._call("cudaFreeHost", pointer)

    def stream(self):
        return self._call("cudaStreamCreate")

    def copy(self, dst: int, src: int, size: int, stream) -> None:
        """Any direction (CUDA tells host from device memory by address), done on return."""
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDefault
        self._call("cudaMemcpyAsync", dst, src, size, kind, stream)
        self.synchronize(stream)

    def copy_async(self, dst: int, src: int, size: int, to_device: bool, stream) -> None:
        kind = self.rt.cudaMemcpyKind
        direction = kind.cudaMemcpyHostToDevice if to_device else kind.cudaMemcpyDeviceToHost
        self._call("cudaMemcpyAsync", dst, src, size, direction, stream)

    def synchronize(self, stream) -> None:
        self._call("cudaStreamSynchronize", stream)

    def memory_info(self) -> tuple[int, int]:
        """The device's free and total memory, in bytes."""
        free, total = self._call("cudaMemGetInfo")
        return int(free), int(total)
