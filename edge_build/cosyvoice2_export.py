"""CosyVoice 2 stages to ONNX (extra `export`: PyTorch and the model classes of
`cosyvoice-minicpmo`), from model objects in memory.

So far the flow-matching estimator, whole-utterance and chunk-causal (streaming) variants: the
stage the GPU path builds a TensorRT engine for. The two variants differ numerically (different
attention masks), so both are exported and each is checked against PyTorch on its own.
"""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

ESTIMATOR_INPUTS = ("x", "mask", "mu", "t", "spks", "cond")
ESTIMATOR_OUTPUT = "estimator_out"
OPSET = 18
# Classifier-free guidance runs the conditional and the unconditional row as one batch of 2.
CFG_BATCH = 2
MEL_BINS = 80


def export_estimator(estimator, out: Path, streaming: bool, frames: int = 64) -> Path:
    """Writes the estimator `(x, mask, mu, t, spks, cond) -> estimator_out` to `out`, with the
    frame count `T` dynamic; `streaming` selects the chunk-causal attention mask."""
    import torch

    class Fixed(torch.nn.Module):
        """The estimator with its streaming flag fixed: the flag is not a graph input."""

        def __init__(self) -> None:
            super().__init__()
            self.estimator = estimator

        def forward(self, x, mask, mu, t, spks, cond):
            return self.estimator(x, mask, mu, t, spks, cond, streaming=streaming)

    example = estimator_example(frames)
    frame_axis = {2: "T"}
    torch.onnx.export(
        Fixed().eval(),
        tuple(example[name] for name in ESTIMATOR_INPUTS),
        str(out),
        dynamo=False,
        opset_version=OPSET,
        input_names=list(ESTIMATOR_INPUTS),
        output_names=[ESTIMATOR_OUTPUT],
        dynamic_axes={
            "x": frame_axis,
            "mask": frame_axis,
            "mu": frame_axis,
            "cond": frame_axis,
            ESTIMATOR_OUTPUT: frame_axis,
        },
    )
    return out


def estimator_example(frames: int, seed: int = 0) -> dict:
    """Inputs of the estimator's shape, `frames` long (torch tensors)."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int):
        return torch.randn(*shape, generator=generator)

    return {
        "x": normal(CFG_BATCH, MEL_BINS, frames),
        "mask": torch.ones(CFG_BATCH, 1, frames),
        "mu": normal(CFG_BATCH, MEL_BINS, frames),
        "t": torch.rand(CFG_BATCH, generator=generator),
        "spks": normal(CFG_BATCH, MEL_BINS),
        "cond": normal(CFG_BATCH, MEL_BINS, frames),
    }


def import_cosyvoice() -> None:
    """Makes the model classes importable without what export does not use: torchaudio (only
    imported by cosyvoice's file utilities, and not installable beside this torch) and matcha's
    training utilities (hydra, lightning). The torchaudio stand-in exists only while that one
    module is imported: transformers looks torchaudio up at import and a stand-in breaks it."""
    if "cosyvoice.utils.file_utils" not in sys.modules:
        sys.modules["torchaudio"] = types.ModuleType("torchaudio")
        try:
            import cosyvoice.utils.file_utils  # noqa: F401
        finally:
            del sys.modules["torchaudio"]
    if "matcha.utils.pylogger" not in sys.modules:
        pylogger = types.ModuleType("matcha.utils.pylogger")
        pylogger.get_pylogger = logging.getLogger  # type: ignore[attr-defined]
        utils = types.ModuleType("matcha.utils")
        utils.pylogger = pylogger  # type: ignore[attr-defined]
        sys.modules["matcha.utils"] = utils
        sys.modules["matcha.utils.pylogger"] = pylogger
