"""What this box's GPU stack offers: the device (through NVML, or the CUDA runtime where NVML is
absent, as on some Jetsons), TensorRT, cuda-python and ONNX Runtime's execution providers.

Every probe answers with a reason when something is missing, so that `backend: auto` can say why
it chose what it chose. Nothing here is imported at module load: a CPU box never loads a CUDA
library. The memory readings feed `stats`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

# The ONNX Runtime execution providers of the GPU backends.
ORT_GPU_PROVIDERS = {"ort-cuda": "CUDAExecutionProvider", "ort-trt": "TensorrtExecutionProvider"}


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    compute_capability: str  # "8.7"
    total_bytes: int

    def identity(self) -> dict[str, str]:
        """What a TensorRT engine depends on (it runs only where it was built)."""
        return {"gpu": self.name, "compute_capability": self.compute_capability}


@dataclass(frozen=True)
class GpuStack:
    """The probe's findings; each `*_problem` says why that part is missing (empty when present)."""

    device: GpuDevice | None
    device_problem: str
    tensorrt: str | None  # version
    tensorrt_problem: str
    cuda_python_problem: str
    ort_providers: tuple[str, ...]

    @property
    def engines_possible(self) -> bool:
        """Native TensorRT engines can be built and run here."""
        present = self.device is not None and self.tensorrt is not None
        return present and not self.cuda_python_problem

    def as_dict(self) -> dict[str, Any]:
        device = self.device
        return {
            "device": None
            if device is None
            else {
                "index": device.index,
                "name": device.name,
                "compute_capability": device.compute_capability,
                "total_bytes": device.total_bytes,
            },
            "device_problem": self.device_problem,
            "tensorrt": self.tensorrt,
            "tensorrt_problem": self.tensorrt_problem,
            "cuda_python_problem": self.cuda_python_problem,
            "onnxruntime_providers": list(self.ort_providers),
        }


def probe(index: int = 0) -> GpuStack:
    device, device_problem = find_device(index)
    tensorrt, tensorrt_problem = _tensorrt_version()
    return GpuStack(
        device=device,
        device_problem=device_problem,
        tensorrt=tensorrt,
        tensorrt_problem=tensorrt_problem,
        cuda_python_problem=_cuda_python_problem(),
        ort_providers=_ort_providers(),
    )


def probe_if_gpu_runtime(index: int = 0) -> GpuStack:
    """The full probe where a GPU backend could run at all; where neither TensorRT nor a GPU
    onnxruntime is installed, the answer without loading NVML or CUDA (on a CPU box, a one-shot
    command and the service start a tenth of a second sooner)."""
    providers = _ort_providers()
    if importlib.util.find_spec("tensorrt") is None and not (
        set(providers) & set(ORT_GPU_PROVIDERS.values())
    ):
        problem = "no GPU runtime is installed (neither TensorRT nor onnxruntime-gpu)"
        return GpuStack(None, problem, None, "TensorRT is not installed", "", providers)
    return probe(index)


def find_device(index: int) -> tuple[GpuDevice | None, str]:
    """NVML first (no CUDA context is created), then the CUDA runtime."""
    device, nvml_problem = _nvml_device(index)
    if device is not None:
        return device, ""
    device, cuda_problem = _cuda_device(index)
    if device is not None:
        return device, ""
    return None, f"no NVIDIA GPU {index} (NVML: {nvml_problem}; CUDA runtime: {cuda_problem})"


def _nvml():
    """pynvml, initialised; raises ImportError or pynvml.NVMLError."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _nvml_device(index: int) -> tuple[GpuDevice | None, str]:
    try:
        nvml = _nvml()
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    except Exception as error:  # pynvml.NVMLError and its many subclasses
        return None, str(error)
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(handle)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        total = nvml.nvmlDeviceGetMemoryInfo(handle).total
    except Exception as error:
        return None, str(error)
    finally:
        nvml.nvmlShutdown()
    name = name.decode() if isinstance(name, bytes) else name
    return GpuDevice(index, name, f"{major}.{minor}", int(total)), ""


def cuda_runtime():
    """cuda-python's runtime module, under its current name or the pre-12.6 one."""
    try:
        return importlib.import_module("cuda.bindings.runtime")
    except ImportError:
        return importlib.import_module("cuda.cudart")


def _cuda_python_problem() -> str:
    try:
        cuda_runtime()
    except ImportError as error:
        return f"cuda-python is not installed ({error})"
    return ""


def _cuda_device(index: int) -> tuple[GpuDevice | None, str]:
    try:
        cudart = cuda_runtime()
    except ImportError:
        return None, "cuda-python is not installed"
    try:
        error, properties = cudart.cudaGetDeviceProperties(index)
    except Exception as error:  # a missing driver surfaces as a runtime error on some versions
        return None, str(error)
    if int(error) != 0:
        return None, f"cudaGetDeviceProperties: {error}"
    name = properties.name
    name = name.decode(errors="replace").rstrip("\0") if isinstance(name, bytes) else str(name)
    capability = f"{properties.major}.{properties.minor}"
    return GpuDevice(index, name, capability, int(properties.totalGlobalMem)), ""


def _tensorrt_version() -> tuple[str | None, str]:
    try:
        tensorrt = importlib.import_module("tensorrt")
    except ImportError as error:
        return None, f"TensorRT is not installed ({error})"
    except OSError as error:  # the wheel is there, its libraries are not
        return None, f"TensorRT cannot load its libraries ({error})"
    version = str(getattr(tensorrt, "__version__", "?"))
    problem = unsupported_tensorrt(version)
    return (None, problem) if problem else (version, "")


TENSORRT_RANGE = ((10, 3), (11, 4))  # the oldest and newest minor releases checked


def unsupported_tensorrt(version: str) -> str:
    """Why this TensorRT cannot be used ('' when it can): 10.3 (JetPack 6.1) to 11.x."""
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return f"TensorRT {version!r} is not a version this fastvoice knows"
    (oldest, newest) = TENSORRT_RANGE
    if found < oldest:
        return (
            f"TensorRT {version} is installed; fastvoice needs TensorRT 10.3 to 11.x (on a "
            "Jetson: JetPack 6.1 or later, whose TensorRT is 10.3; JetPack 6.0 ships 8.6)"
        )
    if found[0] > newest[0]:
        return f"TensorRT {version} is newer than this fastvoice knows (10.3 to 11.x)"
    return ""


def _ort_providers() -> tuple[str, ...]:
    try:
        import onnxruntime
    except ImportError:
        return ()
    return tuple(onnxruntime.get_available_providers())


def memory_in_use(index: int) -> dict[str, int | None] | None:
    """This process's and the whole device's GPU memory in use (NVML), for `stats`; None where
    NVML cannot say (no GPU, no nvidia-ml-py, or a Jetson without NVML). `process_bytes` is
    None where NVML lists processes but none by this PID (in a container it names host PIDs)."""
    try:
        nvml = _nvml()
    except Exception:
        return None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return None
    finally:
        nvml.nvmlShutdown()
    ours = [process.usedGpuMemory or 0 for process in processes if process.pid == os.getpid()]
    mine = sum(ours) if ours or not processes else None
    return {"process_bytes": mine, "device_used_bytes": int(info.used)}


def device_used_bytes(index: int) -> int | None:
    """The device's memory in use by every process (NVML, which makes no CUDA context of its
    own), or None where NVML cannot say. Read before and after something is made on the
    device, the difference is what that took (the device check runs alone on its GPU)."""
    try:
        nvml = _nvml()
    except Exception:
        return None
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(index)).used)
    except Exception:
        return None
    finally:
        nvml.nvmlShutdown()
