"""The rewrite of what TensorRT's parser does not take (edge_build.standard_ops), on small graphs
of each operator: ONNX Runtime runs the original and the rewrite to the same numbers, and the
parser double (tests/gpu_doubles.py) takes the rewrite at the oldest and newest release."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from daemon.errors import BackendError
from edge_build.standard_ops import to_standard_ops
from tests.gpu_doubles import parser_refusals

RNG = np.random.default_rng(7)


def _model(node, inputs, outputs, constants, opset=20):
    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports)


def _run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


CASES = {
    "FastGelu": (
        helper.make_node("FastGelu", ["x", "bias"], ["y"], "gelu", domain="com.microsoft"),
        [("x", [2, 3, 8])],
        ["y"],
        {"bias": _floats(8)},
    ),
    "SkipLayerNormalization": (
        helper.make_node(
            "SkipLayerNormalization",
            ["x", "skip", "gamma", "beta", "bias"],
            ["y", "", "", "sum"],
            "norm",
            domain="com.microsoft",
            epsilon=1e-5,
        ),
        [("x", [2, 3, 8]), ("skip", [2, 3, 8])],
        ["y", "sum"],
        {"gamma": _floats(8), "beta": _floats(8), "bias": _floats(8)},
    ),
    "FusedMatMul": (
        helper.make_node(
            "FusedMatMul", ["a", "b"], ["y"], "", domain="com.microsoft", transA=1, alpha=0.5
        ),
        [("a", [2, 8, 3])],
        ["y"],
        {"b": _floats(8, 4)},
    ),
}
# Kokoro's decoder gives STFT a [batch, length] signal, which ONNX Runtime takes as well.
for _label, _shape in (("STFT", [1, 203, 1]), ("STFT of [batch, length]", [2, 203])):
    CASES[_label] = (
        helper.make_node("STFT", ["signal", "step", "window", "length"], ["y"], "stft"),
        [("signal", _shape)],
        ["y"],
        {
            "step": np.array(5, dtype=np.int64),
            "window": np.hanning(20).astype(np.float32),
            "length": np.array(20, dtype=np.int64),
        },
    )


@pytest.mark.parametrize("op", CASES)
def test_each_rewrite_computes_what_the_operator_did(op):
    node, inputs, outputs, constants = CASES[op]
    feeds = {name: _floats(*shape) for name, shape in inputs}
    original = _model(node, inputs, outputs, constants)
    expected = _run(original, feeds)
    rewritten = to_standard_ops(_model(node, inputs, outputs, constants))
    assert node.op_type not in {n.op_type for n in rewritten.graph.node}
    for want, got in zip(expected, _run(rewritten, feeds), strict=True):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4)


def test_the_parser_double_refuses_the_originals_and_takes_the_rewrites(tmp_path):
    for op, (node, inputs, outputs, constants) in CASES.items():
        original, rewritten = tmp_path / f"{op}.onnx", tmp_path / f"{op}-standard.onnx"
        onnx.save(_model(node, inputs, outputs, constants), str(original))
        onnx.save(to_standard_ops(_model(node, inputs, outputs, constants)), str(rewritten))
        assert parser_refusals(original, "10.3.0"), op
        for tensorrt in ("10.3.0", "11.4.0"):
            assert parser_refusals(rewritten, tensorrt) == [], (op, tensorrt)


def test_an_operator_it_cannot_rewrite_is_named():
    node, inputs, outputs, constants = CASES["STFT"]
    computed = {name: value for name, value in constants.items() if name != "window"}
    model = _model(node, [*inputs, ("window", [20])], outputs, computed)
    with pytest.raises(BackendError, match="window is computed"):
        to_standard_ops(model)
