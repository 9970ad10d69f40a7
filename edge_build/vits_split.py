"""Split a Piper VITS graph at the decoder input: encoder (text → latent frames) and decoder
(latent frames → waveform). The decoder is convolutional, so it can run over overlapping windows
of frames and the first audio of a long sentence comes after one window, not the whole sentence.
"""

from __future__ import annotations

from pathlib import Path

DECODER_PREFIX = "/dec/"
OUTPUT = "output"


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
    onnx.save(extractor.extract_model(graph_inputs, boundary), str(encoder))
    decoder_model = extractor.extract_model(boundary, [OUTPUT])
    if any(value.name in graph_inputs for value in decoder_model.graph.input):
        return None
    onnx.save(decoder_model, str(decoder))
    return encoder, decoder
