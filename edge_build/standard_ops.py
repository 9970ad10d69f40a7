"""A graph for TensorRT's ONNX parser: what it does not take, rewritten into standard ONNX
operators that it does, computing the same.

The published Kokoro graph was saved after ONNX Runtime's transformer fusions, so it holds ONNX
Runtime's own `com.microsoft` operators (FastGelu, SkipLayerNormalization, FusedMatMul) that no
TensorRT parser knows, and its decoder takes its spectrum with STFT, which the parser takes only
from 10.15 (not JetPack 6's 10.3). Each becomes what it stands for: Gelu (its tanh form), an Add
and LayerNormalization, a MatMul of transposed inputs, and a convolution with the DFT's basis
(the window folded in; a strided Conv is what the parser has done since its first releases).
ONNX Runtime's GPU providers take the rewritten graph as well, and fuse again what they like.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from daemon.errors import BackendError

CONTRIB = "com.microsoft"
# Gelu came into the standard set at opset 20, LayerNormalization at 17.
MIN_OPSET = 20


def to_standard_ops(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each operator below rewritten in place (the rest untouched)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    rewrites = {
        (CONTRIB, "FastGelu"): _fast_gelu,
        (CONTRIB, "SkipLayerNormalization"): _skip_layer_norm,
        (CONTRIB, "FusedMatMul"): _fused_matmul,
        ("", "STFT"): _stft,
    }
    wanted = [node for node in model.graph.node if (node.domain, node.op_type) in rewrites]
    if not wanted:
        return model
    if opset < MIN_OPSET:
        raise BackendError(f"cannot rewrite {wanted[0].op_type}: the graph is opset {opset}")
    graph = _Graph(model)
    nodes = []
    for node in model.graph.node:
        rewrite = rewrites.get((node.domain, node.op_type))
        if rewrite is not None and not node.name:  # the rewrite's parts are named after it
            node.name = f"{node.op_type}/{node.output[0]}"
        nodes += rewrite(node, graph) if rewrite else [node]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(graph.added)
    return model


class _Graph:
    """What a rewrite reads of the graph (constants, ranks) and the constants it adds."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.initializers = {tensor.name: tensor for tensor in model.graph.initializer}
        self.added: list[onnx.TensorProto] = []
        self._model = model
        self._ranks: dict[str, int] | None = None

    def constant(self, name: str, node: onnx.NodeProto) -> np.ndarray:
        tensor = self.initializers.get(name)
        if tensor is None:
            raise BackendError(f"cannot rewrite {node.op_type} {node.name}: {name} is computed")
        return numpy_helper.to_array(tensor)

    def add(self, name: str, value: np.ndarray) -> str:
        self.added.append(numpy_helper.from_array(value, name))
        return name

    def rank(self, name: str, node: onnx.NodeProto) -> int:
        if self._ranks is None:  # shape inference once, on the graph without its weights
            bare = onnx.ModelProto()
            bare.CopyFrom(self._model)
            for tensor in bare.graph.initializer:  # the weights, not the shapes and axes
                if tensor.data_type != onnx.TensorProto.INT64:
                    tensor.ClearField("raw_data")
                    tensor.ClearField("float_data")
            inferred = onnx.shape_inference.infer_shapes(bare).graph
            values = [*inferred.value_info, *inferred.input, *inferred.output]
            self._ranks = {
                value.name: len(value.type.tensor_type.shape.dim)
                for value in values
                if value.type.tensor_type.HasField("shape")
            }
            self._ranks |= {t.name: len(t.dims) for t in self._model.graph.initializer}
        if name not in self._ranks:
            raise BackendError(f"cannot rewrite {node.op_type} {node.name}: {name}'s rank unknown")
        return self._ranks[name]


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _fast_gelu(node: onnx.NodeProto, graph: _Graph) -> list[onnx.NodeProto]:
    """FastGelu(x, bias) = Gelu(x + bias), tanh form."""
    x, made = node.input[0], []
    if len(node.input) > 1 and node.input[1]:
        x = f"{node.name}/biased"
        made.append(helper.make_node("Add", node.input[:2], [x], f"{node.name}/Add"))
    gelu = helper.make_node("Gelu", [x], [node.output[0]], node.name, approximate="tanh")
    return [*made, gelu]


def _skip_layer_norm(node: onnx.NodeProto, graph: _Graph) -> list[onnx.NodeProto]:
    """SkipLayerNormalization(x, skip, gamma, beta, bias) = LayerNormalization(x + skip +
    bias) over the last axis; its optional fourth output is that sum."""
    outputs = list(node.output) + [""] * (4 - len(node.output))
    if outputs[1] or outputs[2]:
        raise BackendError(f"cannot rewrite {node.name}: its mean and deviation are read")
    inputs = list(node.input) + [""] * (5 - len(node.input))
    summed = outputs[3] or f"{node.name}/sum"
    made = []
    if inputs[4]:
        with_skip = f"{node.name}/with_skip"
        made.append(helper.make_node("Add", inputs[:2], [with_skip], f"{node.name}/Add"))
        made.append(helper.make_node("Add", [with_skip, inputs[4]], [summed], f"{node.name}/Bias"))
    else:
        made.append(helper.make_node("Add", inputs[:2], [summed], f"{node.name}/Add"))
    epsilon = _attributes(node).get("epsilon", 1e-12)
    norm_inputs = [summed, inputs[2], *([inputs[3]] if inputs[3] else [])]
    made.append(
        helper.make_node(
            "LayerNormalization", norm_inputs, [outputs[0]], node.name, axis=-1, epsilon=epsilon
        )
    )
    return made


def _fused_matmul(node: onnx.NodeProto, graph: _Graph) -> list[onnx.NodeProto]:
    """FusedMatMul(a, b) = alpha * (a or its transpose) @ (b or its transpose)."""
    attributes = _attributes(node)
    if attributes.get("transBatchA", 0) or attributes.get("transBatchB", 0):
        raise BackendError(f"cannot rewrite {node.name}: it transposes batch dimensions")
    made, operands = [], []
    for index, flag in enumerate(("transA", "transB")):
        name = node.input[index]
        if attributes.get(flag, 0):
            rank = graph.rank(name, node)
            perm = [*range(rank - 2), rank - 1, rank - 2]
            transposed = f"{node.name}/{flag}"
            made.append(helper.make_node("Transpose", [name], [transposed], transposed, perm=perm))
            name = transposed
        operands.append(name)
    alpha = attributes.get("alpha", 1.0)
    product = node.output[0] if alpha == 1.0 else f"{node.name}/product"
    made.append(helper.make_node("MatMul", operands, [product], node.name))
    if alpha != 1.0:
        scale = graph.add(f"{node.name}/alpha", np.array(alpha, dtype=np.float32))
        made.append(helper.make_node("Mul", [product, scale], [node.output[0]], f"{node.name}/Mul"))
    return made


def _stft(node: onnx.NodeProto, graph: _Graph) -> list[onnx.NodeProto]:
    """STFT of a real signal ([batch, length, 1] or [batch, length]) = a strided Conv whose
    kernels are the window times the DFT's cosines and negative sines, reshaped to [batch,
    frames, bins, 2]."""
    inputs = list(node.input) + [""] * (4 - len(node.input))
    step = int(graph.constant(inputs[1], node).reshape(()))
    window = graph.constant(inputs[2], node).astype(np.float64) if inputs[2] else None
    length = int(graph.constant(inputs[3], node).reshape(())) if inputs[3] else None
    if window is None and length is None:
        raise BackendError(f"cannot rewrite {node.name}: neither a window nor a frame length")
    length = length or len(window)
    window = np.ones(length) if window is None else window
    if len(window) != length:
        raise BackendError(f"cannot rewrite {node.name}: window {len(window)} for frames {length}")
    bins = length // 2 + 1 if _attributes(node).get("onesided", 1) else length
    angle = 2 * np.pi * np.outer(np.arange(bins), np.arange(length)) / length
    kernels = np.concatenate([window * np.cos(angle), -window * np.sin(angle)])
    weights = graph.add(f"{node.name}/dft", kernels[:, None, :].astype(np.float32))
    shape = graph.add(f"{node.name}/shape", np.array([0, 2, bins, -1], dtype=np.int64))
    name = node.name
    if graph.rank(inputs[0], node) == 2:  # [batch, length], as ONNX Runtime also takes it
        axes = graph.add(f"{name}/axes", np.array([1], dtype=np.int64))
        signal = helper.make_node("Unsqueeze", [inputs[0], axes], [f"{name}/signal"], f"{name}/In")
    else:
        signal = helper.make_node(
            "Transpose", [inputs[0]], [f"{name}/signal"], f"{name}/In", perm=[0, 2, 1]
        )
    return [
        signal,
        helper.make_node(
            "Conv", [f"{name}/signal", weights], [f"{name}/dft_out"], f"{name}/Conv", strides=[step]
        ),
        helper.make_node("Reshape", [f"{name}/dft_out", shape], [f"{name}/parts"], f"{name}/Shape"),
        helper.make_node(
            "Transpose", [f"{name}/parts"], [node.output[0]], f"{name}/Out", perm=[0, 3, 2, 1]
        ),
    ]
