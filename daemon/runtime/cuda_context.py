"""The CUDA context: one per process on the configured device, holding the CUDA runtime's and
the kernel libraries' own memory (a few hundred MB, device-dependent), inside the VRAM budget.

It is reserved in the ledger at `gpu.cuda_context_mb` when a chain with GPU backends is made,
and settled to what it really took when it is made: the device's memory in use before and after
(NVML). Where NVML cannot see the device (some Jetsons) the reservation stands. ONNX Runtime
makes the same (primary) context itself; it is made here first where cuda-python can, so that it
is measured the same way. The ort-trt engines are measured through `measure` likewise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

from daemon.config import GpuConfig
from daemon.errors import BackendError
from daemon.runtime.budget import VramLedger, mb
from daemon.runtime.cuda import Cuda
from daemon.runtime.gpu import device_used_bytes

CONTEXT = "CUDA context"
T = TypeVar("T")


class CudaContext:
    def __init__(
        self,
        ledger: VramLedger,
        gpu: GpuConfig,
        read_used: Callable[[], int | None] | None = None,
        make_cuda: Callable[[], Cuda] | None = None,
    ) -> None:
        """`read_used` and `make_cuda`: NVML's reading and cuda-python's context by default
        (a test passes doubles for what only a GPU has)."""
        self.ledger = ledger
        self.device = gpu.device
        self.read_used = read_used or (lambda: device_used_bytes(gpu.device))
        self.make_cuda = make_cuda or (lambda: Cuda(gpu.device))
        self._cuda: Cuda | None = None
        self._lock = threading.Lock()
        self.reserved = ledger.reserve(
            CONTEXT, "gpu", gpu.context_bytes, "set aside (gpu.cuda_context_mb) until measured"
        )

    def cuda(self) -> Cuda:
        """The context, made and measured on first use; BackendError where CUDA cannot start
        (no driver) or the context leaves no room in the budget."""
        with self._lock:
            if self._cuda is None:
                try:
                    self._cuda = self._make()
                except BackendError as error:
                    raise BackendError(f"CUDA cannot start on GPU {self.device}: {error}") from None
            self._check_room()
            return self._cuda

    def ready_for_onnx_runtime(self) -> None:
        """Made (and measured) before ONNX Runtime's first session would make it unmeasured;
        where cuda-python cannot make it, ONNX Runtime will, and the reservation stands."""
        with self._lock:
            if self._cuda is None:
                with suppress(BackendError):  # ONNX Runtime's own attempt will tell its error
                    self._cuda = self._make()
            self._check_room()

    def _make(self) -> Cuda:
        cuda, taken = self.measure(self.make_cuda)
        if taken is not None:
            how = "measured when it was made (device memory in use before and after)"
            self.reserved = self.ledger.settle(CONTEXT, "gpu", taken, how)
        return cuda

    def _check_room(self) -> None:
        if not self.reserved:
            raise BackendError(
                f"the CUDA context leaves no room in the {mb(self.ledger.budget_bytes)} GPU "
                "budget (gpu.vram_budget_mb; see status/info gpu.decisions)"
            )

    def measure(self, make: Callable[[], T]) -> tuple[T, int | None]:
        """What `make` returns, and the device memory it took (None where NVML cannot say)."""
        before = self.read_used()
        made = make()
        after = self.read_used()
        if before is None or after is None:
            return made, None
        return made, max(0, after - before)
