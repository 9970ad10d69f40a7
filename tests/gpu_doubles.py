"""Test doubles for what only a GPU has, named as such: a GPU stack that claims a device and
TensorRT, and an engine builder that writes a stand-in engine file with plausible figures.
Everything else in the GPU tests (graphs, manifests, the artifact store, ONNX Runtime, the
ledger, the chain) is real."""

from __future__ import annotations

from pathlib import Path

from daemon.runtime.gpu import GpuDevice, GpuStack
from edge_build.trt_engine import EngineFacts, EngineRequest, Progress

FAKE_GPU = "Fake Orin (test double)"


def fake_gpu_stack(
    tensorrt: str = "10.3.0",
    gpu: str = FAKE_GPU,
    capability: str = "8.7",
    claim_providers: tuple[str, ...] = (),
) -> GpuStack:
    """A GPU stack as the probe would find it on a Jetson; `claim_providers` adds ONNX Runtime
    providers this onnxruntime does not really have (as if onnxruntime-gpu were installed)."""
    import onnxruntime

    return GpuStack(
        device=GpuDevice(0, gpu, capability, 8 * 2**30),
        device_problem="",
        tensorrt=tensorrt,
        tensorrt_problem="",
        cuda_python_problem="",
        ort_providers=(*claim_providers, *onnxruntime.get_available_providers()),
    )


class FakeEngineBuilder:
    """Stands in for TensorRT's builder: writes bytes derived from the graph, and reports
    device memory that grows with each profile's largest shapes."""

    def __init__(self, tensorrt: str = "10.3.0", fail_with: Exception | None = None) -> None:
        self.tensorrt = tensorrt
        self.fail_with = fail_with
        self.requests: list[EngineRequest] = []

    def __call__(self, request: EngineRequest, out: Path, progress: Progress) -> EngineFacts:
        self.requests.append(request)
        progress(f"{request.label}: fake build")
        if self.fail_with is not None:
            raise self.fail_with
        out.write_bytes(b"FAKE-ENGINE\0" + request.onnx_fp32.read_bytes()[:4096])
        request.timing_cache.write_bytes(b"fake timing cache")
        profiles = []
        for profile in request.profiles:
            elements = sum(_volume(spec.max) for spec in profile.inputs)
            profiles.append(
                {
                    "index": profile.level,
                    "max_dims": profile.max_dims,
                    "device_memory_bytes": 2_000 * elements,
                    "io_bytes": 8 * elements,
                    "shapes": profile.as_dict()["inputs"],
                }
            )
        return EngineFacts(
            tensorrt=self.tensorrt,
            typing="weak",
            weights_bytes=40 * 2**20,
            profiles=profiles,
            build_s=0.0,
        )


def _volume(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
