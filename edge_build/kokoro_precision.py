"""Kokoro's int8 variant: static int8 in the decoder's convolutions that bear it.

The published graph is dynamic int8 (each activation quantized per run, unsigned weights and
activations, no VNNI path); 97 % of its time is the decoder's generator. Measured on the graph
(one sentence, AVX2 box): the generator's convolutions in static int8 (signed weights per
output channel, activations at ranges calibrated on real sentences) run in 0.77x the published
graph's time but sound broken (wideband PESQ 1.1 against it); the residual blocks' first
convolution of each pair and the noise branch's (30 of 69) take it (0.79x, PESQ 4.05), the
second of each pair does not (PESQ 3.1). So the variant quantizes those 30, the rest stays as
published, and the quality gate still judges it on this box.

How: each chosen ConvInteger (with its DynamicQuantizeLinear, bias and rescale) is folded back
into an fp32 Conv with the same weights, then ONNX Runtime's static quantizer puts
QuantizeLinear/DequantizeLinear pairs around those Convs (which its optimiser turns into
QLinearConv at load).

Every variant the box builds also gives the text side's durations (frames per token) as a
second output, `durations`: what the voice times its words by.
"""

from __future__ import annotations

import collections
import logging
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from daemon.errors import BackendError
from daemon.voices.kokoro import DURATIONS

DECODER = "/decoder/"
WEIGHTS = "weights.bin"
# The predicted frames per token, rounded and clipped, as the published graph names them.
PREDICTED_FRAMES = "/encoder/Clip_output_0"


def takes_static_int8(node_name: str) -> bool:
    """The decoder convolutions that keep their sound in static int8 (see the module's note)."""
    in_resblock = "/resblocks." in node_name and "/convs1." in node_name
    return node_name.startswith(DECODER) and (in_resblock or "/noise_res." in node_name)


# Over 60 lines: one graph rewrite, read top to bottom as the nodes it builds.
def folded_to_fp32(model, chosen: Callable[[str], bool]):
    """`model` with each chosen ConvInteger/MatMulInteger (and the dynamic quantization around
    it) replaced by the Conv/MatMul it stands for, and each chosen DynamicQuantizeLSTM by its
    LSTM, in fp32 with the same weights."""
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {item.name: item for item in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list] = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)

    def array(name: str) -> np.ndarray:
        return numpy_helper.to_array(initializers[name]).astype(np.float32)

    def expect(node, op_type: str):
        if node.op_type != op_type:
            raise BackendError(f"{node.name}: expected {op_type}, found {node.op_type}")
        return node

    replacements, new_weights = {}, []

    def lstm_weight(node, index: int) -> str:
        """DynamicQuantizeLSTM's int8 [directions, inputs, 4 x hidden] weight (1: W, 2: R),
        scaled per direction, as LSTM's fp32 [directions, 4 x hidden, inputs]."""
        at = 8 + 2 * (index - 1)  # W's scale and zero point, then R's
        scale, zero = array(node.input[at]), array(node.input[at + 1])
        weight = (array(node.input[index]) - zero[:, None, None]) * scale[:, None, None]
        name = f"{node.name}_fp32_{'WR'[index - 1]}"
        new_weights.append(numpy_helper.from_array(weight.transpose(0, 2, 1).copy(), name))
        return name

    for node in graph.node:
        if node.op_type == "DynamicQuantizeLSTM" and chosen(node.name):
            inputs = [node.input[0], lstm_weight(node, 1), lstm_weight(node, 2), *node.input[3:8]]
            folded = helper.make_node("LSTM", inputs, list(node.output), name=f"{node.name}_fp32")
            folded.attribute.extend(node.attribute)
            replacements[node.name] = folded
            continue
        if node.op_type not in ("ConvInteger", "MatMulInteger") or not chosen(node.name):
            continue
        quantized_input, weight, _, weight_zero = node.input
        source = expect(producer[quantized_input], "DynamicQuantizeLinear").input[0]
        after = consumers[node.output[0]][0]
        bias = None
        if after.op_type == "Add":  # + round(B / scale): Reshape(Cast(Floor(Div(B, scale))))
            reshape = producer[after.input[1]]
            divide = producer[producer[producer[reshape.input[0]].input[0]].input[0]]
            bias = expect(divide, "Div").input[0]
            after = consumers[after.output[0]][0]
        rescale = consumers[expect(after, "Cast").output[0]][0]
        scales = expect(producer[expect(rescale, "Mul").input[1]], "Mul")
        weight_scale = next(name for name in scales.input if name in initializers)
        dequantized = (array(weight) - array(weight_zero)) * array(weight_scale)
        weight_name = f"{node.name}_fp32_weight"
        new_weights.append(numpy_helper.from_array(dequantized, weight_name))
        if node.op_type == "ConvInteger":
            inputs = [source, weight_name, *([bias] if bias else [])]
            folded = helper.make_node("Conv", inputs, [rescale.output[0]], name=f"{node.name}_fp32")
            folded.attribute.extend(node.attribute)
        else:
            folded = helper.make_node(
                "MatMul", [source, weight_name], [rescale.output[0]], name=f"{node.name}_fp32"
            )
        replacements[rescale.name] = folded
    nodes = _reachable([replacements.get(node.name, node) for node in graph.node], graph)
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input}
    kept = [item for item in graph.initializer if item.name in used] + new_weights
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model


def with_durations(model):
    """`model` with the predicted frames per token as a second output, `durations`."""
    from onnx import TensorProto, helper

    if not any(PREDICTED_FRAMES in node.output for node in model.graph.node):
        raise BackendError(f"the Kokoro graph has no {PREDICTED_FRAMES} to time words by")
    model.graph.node.append(
        helper.make_node("Identity", [PREDICTED_FRAMES], [DURATIONS], name="durations_out")
    )
    model.graph.output.append(helper.make_tensor_value_info(DURATIONS, TensorProto.FLOAT, None))
    return model


def timed_copy(graph: Path, out: Path) -> Path:
    """Writes the published graph with its `durations` output (weights as published)."""
    import onnx

    onnx.save(with_durations(onnx.load(str(graph))), str(out))
    return out


INT8_OPS = ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM")


def fp32_rewrite(graph: Path, out: Path) -> Path:
    """Writes the published graph wholly in fp32 with the same weights (one file, about
    330 MB): what the GPU runtimes take, having no kernels for its int8 operators, and in
    operators TensorRT's parser takes (edge_build.standard_ops). Its durations differ from the
    published graph's on a few tokens (the text side in fp32)."""
    import onnx

    from edge_build.standard_ops import to_standard_ops

    model = to_standard_ops(folded_to_fp32(onnx.load(str(graph)), lambda _name: True))
    left = {node.op_type for node in model.graph.node} & set(INT8_OPS)
    if left:
        raise BackendError(f"{graph.name}: the fp32 rewrite left {sorted(left)}")
    onnx.save(model, str(out))
    return out


def _reachable(nodes: list, graph) -> list:
    """The nodes whose outputs something still reads (the graph's outputs at the end)."""
    outputs = {output.name for output in graph.output}
    while True:
        read = {name for node in nodes for name in node.input} | outputs
        kept = [node for node in nodes if any(output in read for output in node.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept


def make_static_int8(graph: Path, out: Path, calibration: Iterable[dict[str, np.ndarray]]) -> Path:
    """Writes the int8 variant of the published Kokoro graph at `out` (weights beside it),
    its activation ranges calibrated on `calibration` (the graph's inputs for real sentences)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Feeds(CalibrationDataReader):
        def __init__(self, feeds: Iterator[dict[str, np.ndarray]]) -> None:
            self.feeds = feeds

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice goes to root
    try:
        with tempfile.TemporaryDirectory(dir=out.parent) as temp:
            folded_path = Path(temp) / "folded.onnx"
            folded = with_durations(folded_to_fp32(onnx.load(str(graph)), takes_static_int8))
            onnx.save(folded, str(folded_path), save_as_external_data=True, location=WEIGHTS)
            chosen = [
                node.name
                for node in folded.graph.node
                if node.op_type == "Conv" and takes_static_int8(node.name)
            ]
            del folded
            quantize_static(
                str(folded_path),
                str(out),
                Feeds(iter(calibration)),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                weight_type=QuantType.QInt8,
                activation_type=QuantType.QUInt8,
                nodes_to_quantize=chosen,
                calibrate_method=CalibrationMethod.MinMax,
                use_external_data_format=True,
            )
    except (ValueError, RuntimeError, KeyError, StopIteration) as error:
        raise BackendError(f"cannot make the int8 variant of {graph.name}: {error}") from error
    finally:
        logging.getLogger().setLevel(quiet)
    return out
