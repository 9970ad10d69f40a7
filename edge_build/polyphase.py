"""HiFi-GAN's upsampling transposed convolutions as ordinary convolutions (polyphase form).

A ConvTranspose1d with stride s, kernel 2s and padding s/2 makes s output samples per input
frame, each a sum over three neighbouring input frames. The same sums are one Conv1d with s times
the output channels (kernel 3, one tap of each phase zero), then the phases interleaved
(reshape, transpose, reshape). The audio is the same to float rounding; ONNX Runtime's CPU
convolution runs it in about two thirds of the transposed convolution's time (the upsampling was
a sixth of a Piper decoder's time). Other transposed convolutions are left as they are.
"""

from __future__ import annotations

import numpy as np

TAPS = 3  # frames n-1, n, n+1


# Over 60 lines: one graph rewrite, read top to bottom as the nodes it builds.
def polyphase_upsampling(model) -> int:
    """Rewrites `model` (an onnx ModelProto) in place; returns how many nodes it rewrote."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    nodes, rewritten = [], 0
    for node in graph.node:
        shape = _polyphase_shape(node, weights)
        if shape is None:
            nodes.append(node)
            continue
        stride, padding = shape
        kernel = numpy_helper.to_array(weights[node.input[1]])  # in, out, 2 * stride
        channels = kernel.shape[1]
        bias = (
            numpy_helper.to_array(weights[node.input[2]])
            if len(node.input) > 2 and node.input[2]
            else np.zeros(channels, kernel.dtype)
        )
        prefix = node.name or node.output[0]
        names = {key: f"{prefix}/polyphase/{key}" for key in ("w", "b", "z", "phases", "t")}
        constants = {
            names["w"]: _phase_kernels(kernel, stride, padding),
            names["b"]: np.tile(bias, stride),
            f"{prefix}/polyphase/split": np.array([0, stride, channels, -1], np.int64),
            f"{prefix}/polyphase/join": np.array([0, channels, -1], np.int64),
        }
        graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
        nodes += [
            helper.make_node(
                "Conv",
                [node.input[0], names["w"], names["b"]],
                [names["z"]],
                name=f"{prefix}/polyphase/Conv",
                kernel_shape=[TAPS],
                pads=[1, 1],
            ),
            helper.make_node(
                "Reshape",
                [names["z"], f"{prefix}/polyphase/split"],
                [names["phases"]],
                name=f"{prefix}/polyphase/Split",
            ),
            helper.make_node(
                "Transpose",
                [names["phases"]],
                [names["t"]],
                name=f"{prefix}/polyphase/Interleave",
                perm=[0, 2, 3, 1],
            ),
            helper.make_node(
                "Reshape",
                [names["t"], f"{prefix}/polyphase/join"],
                [node.output[0]],
                name=f"{prefix}/polyphase/Join",
            ),
        ]
        rewritten += 1
    if rewritten:
        del graph.node[:]
        graph.node.extend(nodes)
        used = {name for node in graph.node for name in node.input}
        kept = [init for init in graph.initializer if init.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return rewritten


def _polyphase_shape(node, weights) -> tuple[int, int] | None:
    """(stride, padding) of a 1-D transposed convolution this rewrite covers, else None."""
    from onnx import helper

    if node.op_type != "ConvTranspose" or node.input[1] not in weights:
        return None
    if len(node.input) > 2 and node.input[2] and node.input[2] not in weights:
        return None
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if set(attributes) - {"kernel_shape", "strides", "pads", "dilations", "group"}:
        return None  # output_padding, output_shape, auto_pad: another shape of problem
    kernel = list(weights[node.input[1]].dims)
    strides, pads = attributes.get("strides", [1]), attributes.get("pads", [0, 0])
    if len(kernel) != 3 or attributes.get("group", 1) != 1:
        return None
    if attributes.get("dilations", [1]) != [1] or len(strides) != 1 or pads[0] != pads[-1]:
        return None
    stride, padding = strides[0], pads[0]
    if stride < 2 or stride % 2 or kernel[2] != 2 * stride or 2 * padding != stride:
        return None
    return stride, padding


def _phase_kernels(kernel: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """[stride * out, in, 3]: phase r's kernel over frames n-1, n, n+1 for output n*s + r.

    Output t = n*s + r takes the transposed kernel's tap j from input frame i where
    i*s + j = t + padding; with j < 2s that is two frames, n-1 and n (r + padding < s) or n and
    n+1 (otherwise)."""
    channels_in, channels_out, _ = kernel.shape
    phases = np.zeros((stride, channels_out, channels_in, TAPS), kernel.dtype)
    for phase in range(stride):
        tap = phase + padding
        if tap < stride:
            phases[phase, :, :, 0] = kernel[:, :, tap + stride].T
            phases[phase, :, :, 1] = kernel[:, :, tap].T
        else:
            phases[phase, :, :, 1] = kernel[:, :, tap].T
            phases[phase, :, :, 2] = kernel[:, :, tap - stride].T
    return phases.reshape(stride * channels_out, channels_in, TAPS)
