"""Split a Piper VITS graph at the decoder input: encoder (text → latent frames) and decoder
(latent frames → waveform). The decoder is convolutional, so it can run over overlapping windows
of frames and the first audio of a long sentence comes after one window, not the whole sentence.
The encoder also gives the frames of each phoneme id (piper-tts's alignment tensor), from which
the voice times its words for captions. The decoder's upsampling is rewritten in polyphase form
(edge_build.polyphase): the same audio, sooner.
"""

from __future__ import annotations

from pathlib import Path

from daemon.parts import WHOLE
from edge_build.polyphase import polyphase_upsampling

DECODER_PREFIX = "/dec/"
OUTPUT = "output"
# The latent frames' dimensions, named so that TensorRT profiles (config `gpu.profiles`) and
# ONNX Runtime see a known rank: batch, channels (fixed by the decoder's first conv), frames.
BATCH_DIM, FRAMES_DIM = "batch_size", "frames"
PARTS = ("encoder", "decoder")


def split_graphs(model: Path, directory: Path) -> dict[str, Path]:
    """Encoder and decoder when the graph splits (streaming inside a sentence), else the whole."""
    parts = split_vits(model, directory)
    return dict(zip(PARTS, parts, strict=True)) if parts is not None else {WHOLE: model}


def decoder_inputs(model) -> list[str]:
    """Tensors the decoder reads from the rest of the graph (latent frames, speaker embedding)."""
    initializers = {init.name for init in model.graph.initializer}
    decoder = [node for node in model.graph.node if node.name.startswith(DECODER_PREFIX)]
    produced = {output for node in decoder for output in node.output}
    return sorted(
        {
            name
            for node in decoder
            for name in node.input
            if name and name not in initializers and name not in produced
        }
    )


def split_vits(source: Path, directory: Path) -> tuple[Path, Path] | None:
    """Writes encoder.onnx and decoder.onnx; None when the graph has no separable decoder."""
    import onnx
    import onnx.utils

    model = onnx.load(str(source))
    boundary = decoder_inputs(model)
    if not boundary:
        return None
    graph_inputs = [value.name for value in model.graph.input]
    extractor = onnx.utils.Extractor(model)
    encoder, decoder = directory / "encoder.onnx", directory / "decoder.onnx"
    encoder_model = extractor.extract_model(graph_inputs, boundary + _alignment(model))
    decoder_model = extractor.extract_model(boundary, [OUTPUT])
    if any(value.name in graph_inputs for value in decoder_model.graph.input):
        return None
    for value in (*decoder_model.graph.input, *encoder_model.graph.output):
        _name_latent_dims(model, value)
    polyphase_upsampling(decoder_model)
    onnx.save(encoder_model, str(encoder))
    onnx.save(decoder_model, str(decoder))
    return encoder, decoder


def _alignment(model) -> list[str]:
    """The tensor of frames per phoneme id, where the graph has one (one Ceil node)."""
    from piper.patch_voice_with_alignment import add_alignment_output

    try:
        return [add_alignment_output(model)]
    except ValueError:  # no Ceil, or several: the voice speaks, without word timings
        return []


def _name_latent_dims(model, value) -> None:
    """[batch_size, C, frames] on a boundary tensor read by a convolution (the latent frames),
    where shape inference left it without a shape; other tensors are left as they are."""
    import onnx

    weights = {init.name: init for init in model.graph.initializer}
    for node in model.graph.node:
        if value.type.tensor_type.shape.dim:
            return
        if node.op_type == "Conv" and node.input[0] == value.name and node.input[1] in weights:
            channels = weights[node.input[1]].dims[1]
            elem_type = value.type.tensor_type.elem_type or onnx.TensorProto.FLOAT
            value.type.CopyFrom(
                onnx.helper.make_tensor_type_proto(elem_type, [BATCH_DIM, channels, FRAMES_DIM])
            )
            return
