"""CosyVoice 2 stages exported to ONNX equal PyTorch, on tiny random-weight models built from the
real classes (`cosyvoice-minicpmo`). They need PyTorch: `.ci/run` runs them in their own virtual
environment (`tools/setup-export.sh`) with `-m cosyvoice`, and there a missing package is an
error, not a skip; the main environment leaves them out (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.cosyvoice


@pytest.fixture(scope="module")
def estimator():
    """A tiny flow-matching estimator: the real class at its smallest workable width."""
    import torch

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.flow.decoder import CausalConditionalDecoder

    torch.manual_seed(0)
    return CausalConditionalDecoder(
        in_channels=320,  # x, mu, spks and cond: 4 x 80 mel bins
        out_channels=80,
        channels=[64],
        dropout=0.0,
        attention_head_dim=16,
        n_blocks=1,
        num_mid_blocks=1,
        num_heads=2,
        act_fn="gelu",
        static_chunk_size=50,
        num_decoding_left_chunks=-1,
    ).eval()


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "chunk-causal"])
def test_estimator_onnx_equals_pytorch_at_any_length(estimator, streaming, tmp_path):
    import onnxruntime
    import torch

    from edge_build.cosyvoice2_export import (
        ESTIMATOR_INPUTS,
        estimator_example,
        export_estimator,
    )

    path = export_estimator(estimator, tmp_path / "estimator.onnx", streaming)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(ESTIMATOR_INPUTS)
    for frames in (37, 150):  # not the export length; 150 spans three 50-frame chunks
        example = estimator_example(frames, seed=frames)
        with torch.no_grad():
            expected = estimator(*example.values(), streaming=streaming).numpy()
        (got,) = session.run(None, {name: value.numpy() for name, value in example.items()})
        assert got.shape == (2, 80, frames)
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_the_streaming_variant_is_a_different_graph(estimator, tmp_path):
    """Chunk-causal attention changes the result: a streaming request must not get the whole
    variant (or the other way round)."""
    import torch

    from edge_build.cosyvoice2_export import estimator_example

    example = estimator_example(150)
    with torch.no_grad():
        whole = estimator(*example.values(), streaming=False).numpy()
        chunked = estimator(*example.values(), streaming=True).numpy()
    assert np.abs(whole - chunked).max() > 1e-3
