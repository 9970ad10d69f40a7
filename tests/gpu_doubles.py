"""Test doubles for what only a GPU has, named as such: a GPU stack that claims a device and
TensorRT, and an engine builder that writes a stand-in engine file with plausible figures.
Everything else in the GPU tests (graphs, manifests, the artifact store, ONNX Runtime, the
ledger, the chain) is real.

The engine builder refuses a graph as TensorRT's ONNX parser would: an operator outside the
parser's list for its release (tests/data/tensorrt_onnx_ops.json, from ONNX-TensorRT's own
operator pages), an opset outside its range, or an STFT whose window is computed."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from daemon.errors import BackendError
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
        for graph in (request.onnx_fp32, request.onnx_fp16):
            refused = parser_refusals(graph, self.tensorrt) if graph is not None else []
            if refused:
                raise BackendError(f"TensorRT {self.tensorrt}'s ONNX parser: {'; '.join(refused)}")
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


@functools.cache
def _parser_pages() -> dict[str, dict]:
    path = Path(__file__).parent / "data" / "tensorrt_onnx_ops.json"
    return json.loads(path.read_text())["releases"]


def parser_page(tensorrt: str) -> tuple[str, dict]:
    """The newest operator page on record at or below `tensorrt` (11.x: the newest page)."""
    wanted = tuple(int(part) for part in tensorrt.split(".")[:2])
    pages = sorted(_parser_pages().items(), key=lambda item: tuple(map(int, item[0].split("."))))
    at_or_below = [page for page in pages if tuple(map(int, page[0].split("."))) <= wanted]
    return (at_or_below or pages[:1])[-1]


def parser_refusals(graph: Path, tensorrt: str) -> list[str]:
    """What TensorRT `tensorrt`'s ONNX parser refuses in `graph`, subgraphs included."""
    import onnx

    release, page = parser_page(tensorrt)
    model = onnx.load(str(graph), load_external_data=False)
    refused = []
    low, high = page["opsets"]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is not None and not low <= opset <= high:
        refused.append(f"opset {opset} (parser {release} takes {low} to {high})")
    initializers = {tensor.name for tensor in model.graph.initializer}
    for node in _nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            refused.append(f"{node.op_type} of domain {node.domain} ({node.name})")
        elif node.op_type not in page["supported"]:
            refused.append(f"{node.op_type} ({node.name}; not in parser {release}'s list)")
        elif node.op_type == "STFT" and any(n not in initializers for n in node.input[1:3] if n):
            refused.append(f"STFT whose frame_step or window is computed ({node.name})")
    return sorted(set(refused))


def _nodes(graph) -> list:
    """Every node of `graph` and of the graphs inside its If, Loop and Scan nodes."""
    import onnx

    found = []
    for node in graph.node:
        found.append(node)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                found += _nodes(attribute.g)
            for inner in attribute.graphs:
                found += _nodes(inner)
    return found


def _volume(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
