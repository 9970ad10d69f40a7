"""A decoding loop's cache stays with ONNX Runtime between runs (Stage.run_kept), and gives
what the plain numpy round trip gives."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from daemon.runtime.ort_cpu import OrtCpuBackend


def cache_graph(path) -> None:
    """present = concat(past, x) along the last axis; y = x + 1: a stand-in for a KV cache."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "S"])
    past = helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "P"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "S"])
    present = helper.make_tensor_value_info("present", TensorProto.FLOAT, [1, "P+S"])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [
        helper.make_node("Add", ["x", "one"], ["y"]),
        helper.make_node("Concat", ["past", "x"], ["present"], axis=1),
    ]
    graph = helper.make_graph(nodes, "cache", [x, past], [y, present], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, str(path))


def test_kept_outputs_stay_ort_values_and_feed_back(tmp_path):
    cache_graph(tmp_path / "cache.onnx")
    stage = OrtCpuBackend(threads=1).load(tmp_path / "cache.onnx", "cache")
    steps = [np.full((1, n), n, np.float32) for n in (3, 1, 1, 2)]
    kept = np.zeros((1, 0), np.float32)
    plain = np.zeros((1, 0), np.float32)
    for x in steps:
        y, kept = stage.run_kept({"x": x, "past": kept}, keep={"present"})
        assert isinstance(kept, onnxruntime.OrtValue) and isinstance(y, np.ndarray)
        assert kept.device_name() == "cpu"
        np.testing.assert_array_equal(y, x + 1)
        _, plain = stage.run({"x": x, "past": plain})
    np.testing.assert_array_equal(kept.numpy(), plain)
    assert plain.shape == (1, 7)


@pytest.mark.gpu
@pytest.mark.skipif(
    "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
    reason="onnxruntime-gpu with its CUDA provider is not installed here",
)
def test_kept_outputs_stay_on_the_gpu_under_ort_cuda(tmp_path):
    """ONNX Runtime returns unbound outputs in host memory: the kept cache must be bound to
    the device, and stay there between steps."""
    from daemon.runtime.ort_values import run_keeping

    cache_graph(tmp_path / "cache.onnx")
    session = onnxruntime.InferenceSession(
        str(tmp_path / "cache.onnx"), providers=["CUDAExecutionProvider"]
    )
    if "CUDAExecutionProvider" not in session.get_providers():
        pytest.skip("the CUDA provider fell back to the CPU: no usable GPU")
    kept = np.zeros((1, 0), np.float32)
    for n in (3, 1, 2):
        y, kept = run_keeping(
            session, {"x": np.full((1, n), n, np.float32), "past": kept}, {"present"}, "cuda", 0
        )
        assert kept.device_name() == "cuda" and isinstance(y, np.ndarray)
    assert kept.numpy().shape == (1, 6)
