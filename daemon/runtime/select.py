"""Pick the backends for this box: the one named in config, or for `auto` the best it has, each
falling back down the chain trt → ort-cuda → ort-cpu (ort-trt → ort-cuda → ort-cpu), so that a
missing library, a missing engine or a tight VRAM budget costs speed, never the service.

A backend that cannot run here at all is left out of the chain up front, with the reason; one
that fails for a stage (no engine for it, over budget, ONNX Runtime gave the CPU instead) hands
that stage to the next, and the decision is kept in the VRAM ledger for `status/info`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.config import Config
from daemon.errors import BackendError
from daemon.parts import WHOLE, part_label
from daemon.runtime.artifacts import default_store
from daemon.runtime.base import Backend, Precision, Stage
from daemon.runtime.gpu import ORT_GPU_PROVIDERS, GpuStack, memory_in_use, probe_if_gpu_runtime
from daemon.runtime.ort_cpu import OrtCpuBackend, physical_cores_available

if TYPE_CHECKING:  # the GPU backends are imported only where a chain uses them
    from daemon.runtime.budget import VramLedger

log = logging.getLogger(__name__)

CHAINS = {
    "auto": ("trt", "ort-cuda", "ort-cpu"),
    "trt": ("trt", "ort-cuda", "ort-cpu"),
    "ort-trt": ("ort-trt", "ort-cuda", "ort-cpu"),
    "ort-cuda": ("ort-cuda", "ort-cpu"),
    "ort-cpu": ("ort-cpu",),
}


class BackendChain(Backend):
    """Each stage loads on the first backend of the chain that can take it."""

    def __init__(
        self, backends: list[Backend], ledger: VramLedger, stack: GpuStack, device: int
    ) -> None:
        self.backends = backends
        self.ledger = ledger
        self.stack = stack
        self.device = device
        self.workers = max(backend.workers for backend in backends)

    @property
    def name(self) -> str:  # type: ignore[override]  # the chain is named by its members
        return " > ".join(backend.name for backend in self.backends)

    def request(self) -> AbstractContextManager[None]:
        @contextmanager
        def every() -> Iterator[None]:
            with ExitStack() as stack:
                for backend in self.backends:
                    stack.enter_context(backend.request())
                yield

        return every()

    def precision_for(self, model_path: Path) -> Precision | None:
        """Its CPU member's (a GPU member's precision is its config's), with nothing
        approximated: the gate judged the approximations on the CPU, and a stage may load on a
        GPU."""
        for backend in self.backends:
            precision = backend.precision_for(model_path)
            if precision is not None:
                return replace(precision, approximations={})
        return None

    def has_part(self, model_path: Path, part: str, precision: Precision | None = None) -> bool:
        return any(backend.has_part(model_path, part, precision) for backend in self.backends)

    def load(
        self, model_path: Path, stage: str, part: str = WHOLE, precision: Precision | None = None
    ) -> Stage:
        from daemon.runtime.budget import Decision

        label = part_label(stage, part)
        problems = []
        for backend in self.backends:
            if part != WHOLE and not backend.has_part(model_path, part, precision):
                problems.append(f"{backend.name}: no {part} part built")
                continue
            try:
                loaded = backend.load(model_path, stage, part, precision)
            except BackendError as error:
                problems.append(f"{backend.name}: {error}")
                self.ledger.note(Decision(label, "next", f"{backend.name}: {error}"))
                continue
            if problems:
                log.warning("%s: on %s because %s", label, backend.name, "; ".join(problems))
            self.ledger.note(Decision(label, backend.name, "; ".join(problems) or "first choice"))
            return loaded
        raise BackendError(f"{label}: no backend could load it ({'; '.join(problems)})")

    def gpu_report(self) -> dict[str, Any] | None:
        return {"stack": self.stack.as_dict(), "budget": self.ledger.as_dict()}

    def gpu_memory(self) -> dict[str, int] | None:
        reading = memory_in_use(self.device)
        if reading is not None:
            reading["budget_bytes"] = self.ledger.budget_bytes
        return reading


def unavailable(name: str, stack: GpuStack) -> str:
    """Why backend `name` cannot run on this box at all ('' when it might)."""
    if name == "ort-cpu":
        return ""
    if stack.device is None:
        return stack.device_problem
    if name == "trt":
        return stack.tensorrt_problem or stack.cuda_python_problem
    provider = ORT_GPU_PROVIDERS[name]
    if provider not in stack.ort_providers:
        return (
            f"this onnxruntime has no {provider} (it has: {', '.join(stack.ort_providers)}); "
            "install onnxruntime-gpu in place of onnxruntime"
        )
    return ""


def plan_chain(choice: str, stack: GpuStack) -> tuple[list[str], str]:
    """The backends to try, in order, and a one-line reason for logs and status."""
    chain, left_out = [], {}  # problem -> the backends it leaves out
    for name in CHAINS[choice]:
        problem = unavailable(name, stack)
        if problem:
            left_out.setdefault(problem, []).append(name)
        else:
            chain.append(name)
    where = ""
    if stack.device is not None:
        where = f" on {stack.device.name} (compute {stack.device.compute_capability})"
    head = "auto" if choice == "auto" else f"{choice}: chosen in config"
    reason = f"{head}: {' > '.join(chain)}{where}"
    for problem, names in left_out.items():
        reason += f"; {' and '.join(names)} left out: {problem}"
    return chain, reason


def create_backend(
    config: Config,
    concurrent: bool = False,
    probe_stack: Callable[[int], GpuStack] = probe_if_gpu_runtime,
) -> tuple[Backend, str]:
    """Returns the backend (a chain where a GPU backend is in play) and a one-line reason,
    logged and shown in status.

    `concurrent`: whether requests may overlap (the service), so parallel workers pay off;
    a one-shot command serves one request and loads one session per stage.
    `probe_stack` finds what the GPU stack offers (a test passes one that fakes a GPU).
    """
    runtime = config.runtime
    threads = None if runtime.threads == "auto" else runtime.threads
    workers = 1
    if concurrent:
        workers = physical_cores_available() if runtime.workers == "auto" else runtime.workers
    store = (runtime.artifact_dir or default_store()) if runtime.artifacts else None
    cpu = OrtCpuBackend(
        threads=threads,
        artifact_store=store,
        workers=workers,
        precision=runtime.precision,
        yield_busy_cores=runtime.yield_busy_cores,
    )
    if runtime.backend == "ort-cpu":
        return cpu, "ort-cpu: chosen in config"
    stack = probe_stack(config.gpu.device)
    names, reason = plan_chain(runtime.backend, stack)
    if names == ["ort-cpu"]:
        return cpu, reason
    from daemon.runtime.budget import VramLedger
    from daemon.runtime.cuda_context import CudaContext
    from daemon.runtime.ort_gpu import OrtGpuBackend
    from daemon.runtime.trt import TrtBackend

    ledger = VramLedger(config.gpu.budget_bytes, lanes=workers)
    context = CudaContext(ledger, config.gpu)
    backends: list[Backend] = []
    for name in names:
        if name == "ort-cpu":
            backends.append(cpu)
        elif name == "trt":
            if store is None:
                reason += "; trt left out: its engines live in the artifact store (artifacts off)"
                continue
            backends.append(TrtBackend(config.gpu, stack, context, store, workers))
        else:
            backends.append(
                OrtGpuBackend(name, config.gpu, context, store, stack.ort_providers, workers)
            )
    return BackendChain(backends, ledger, stack, config.gpu.device), reason
