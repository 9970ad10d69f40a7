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


@pytest.fixture(scope="module")
def hift():
    """A tiny HiFT vocoder at 24 kHz (CosyVoice 2's rates: 8 x 5 x 3 upsampling, hop 4)."""
    import torch

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.hifigan.f0_predictor import ConvRNNF0Predictor
    from cosyvoice.hifigan.generator import HiFTGenerator

    torch.manual_seed(1)
    return HiFTGenerator(
        in_channels=80,
        base_channels=32,
        nb_harmonics=8,
        sampling_rate=24000,
        upsample_rates=[8, 5, 3],
        upsample_kernel_sizes=[16, 11, 7],
        istft_params={"n_fft": 16, "hop_len": 4},
        resblock_kernel_sizes=[3, 7, 11],
        resblock_dilation_sizes=[[1, 3, 5]] * 3,
        source_resblock_kernel_sizes=[7, 7, 11],
        source_resblock_dilation_sizes=[[1, 3, 5]] * 3,
        f0_predictor=ConvRNNF0Predictor(num_class=1, in_channels=80, cond_channels=32),
    ).eval()


def test_source_stft_as_a_convolution_equals_torch_stft(hift):
    import torch

    from edge_build.cosyvoice2_export import stft_as_conv

    signal = torch.randn(1, 4801)
    real, imag = hift._stft(signal)
    conv_real, conv_imag = stft_as_conv(signal, 16, 4, hift.stft_window)
    np.testing.assert_allclose(conv_real.numpy(), real.numpy(), atol=1e-5)
    np.testing.assert_allclose(conv_imag.numpy(), imag.numpy(), atol=1e-5)


def test_numpy_istft_equals_torch_istft(hift):
    import torch

    from daemon.voices.hift import istft

    magnitude = torch.rand(1, 9, 241) * 3
    phase = (torch.rand(1, 9, 241) - 0.5) * 6
    expected = hift._istft(magnitude, phase).numpy()
    got = istft(magnitude.numpy(), phase.numpy(), 16, 4)
    assert got.shape == expected.shape == (1, 960)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_hift_graphs_and_numpy_istft_equal_the_vocoder(hift, tmp_path):
    """The two exported graphs and the numpy iSTFT make the waveform HiFT makes, given the
    same random draws (source initial phases and noise as graph inputs)."""
    import onnxruntime
    import torch

    from daemon.voices.hift import istft
    from edge_build.cosyvoice2_export import export_hift, hift_example, injected_draws

    source_path, filter_path = export_hift(hift, tmp_path)
    source_graph = onnxruntime.InferenceSession(str(source_path))
    filter_graph = onnxruntime.InferenceSession(str(filter_path))
    for mel_frames in (13, 31):  # not the export length
        example = hift_example(hift, mel_frames, seed=mel_frames)
        with torch.no_grad(), injected_draws(example["initial_phases"], example["noise"]):
            expected_audio, expected_source = hift.inference(example["speech_feat"])
        feeds = {name: value.numpy() for name, value in example.items()}
        (source,) = source_graph.run(None, feeds)
        np.testing.assert_allclose(source, expected_source.numpy(), atol=1e-4)
        magnitude, phase = filter_graph.run(
            None, {"speech_feat": feeds["speech_feat"], "source": source}
        )
        audio = np.clip(istft(magnitude, phase, 16, 4), -hift.audio_limit, hift.audio_limit)
        assert audio.shape == expected_audio.shape == (1, mel_frames * 480)
        np.testing.assert_allclose(audio, expected_audio.numpy(), atol=1e-4)


def test_the_draws_change_the_sound(hift):
    """The random draws reach the output: a graph that ignored them would still pass above."""
    import torch

    from edge_build.cosyvoice2_export import hift_example, injected_draws

    one, other = hift_example(hift, 13, seed=1), hift_example(hift, 13, seed=2)
    with torch.no_grad(), injected_draws(one["initial_phases"], one["noise"]):
        first, _ = hift.inference(one["speech_feat"])
    with torch.no_grad(), injected_draws(other["initial_phases"], other["noise"]):
        second, _ = hift.inference(one["speech_feat"])
    assert np.abs(first.numpy() - second.numpy()).max() > 1e-4


SPEECH_VOCABULARY = 100  # the real one has 6561 tokens; stop ids follow it


def greedy(scores, decoded, top_k):
    """Sampling replaced by argmax, so that two decoders can be compared token by token."""
    return scores.argmax().reshape(1)


@pytest.fixture(scope="module")
def lm():
    """A tiny Qwen2 speech-token LLM from the real classes (eager attention: its causal mask
    is built from the cache positions, which the exported graph needs for any prompt length)."""
    import torch
    from transformers import Qwen2ForCausalLM

    from edge_build.cosyvoice2_export import import_cosyvoice
    from tests.cosyvoice2_tiny import tiny_qwen_config

    import_cosyvoice()
    from cosyvoice.llm.llm import Qwen2Encoder, Qwen2LM

    torch.manual_seed(2)
    config = tiny_qwen_config(vocab_size=300, positions=2048)
    config._attn_implementation = "eager"
    backbone = Qwen2Encoder.__new__(Qwen2Encoder)  # its __init__ loads pretrained weights
    torch.nn.Module.__init__(backbone)
    backbone.model = Qwen2ForCausalLM(config).eval()
    return Qwen2LM(64, 64, SPEECH_VOCABULARY, backbone, greedy).eval()


def test_llm_step_decodes_the_same_tokens_as_the_reference(lm, tmp_path):
    import onnxruntime
    import torch

    from daemon.voices.voice_pack import llm_cache_names
    from edge_build.cosyvoice2_export import embedding_tables, export_llm_step

    session = onnxruntime.InferenceSession(str(export_llm_step(lm, tmp_path / "llm.onnx")))
    tables = embedding_tables(lm)
    past_names, _ = llm_cache_names(2)
    for seed in (3, 4):
        text = torch.randint(0, 300, (1, 7), generator=torch.Generator().manual_seed(seed))
        empty = torch.zeros(1, 0, dtype=torch.long)
        expected = list(
            lm.inference(
                text,
                torch.tensor([7]),
                empty,
                torch.tensor([0]),
                empty,
                torch.tensor([0]),
                torch.zeros(1, 0),
                sampling=25,
                max_token_text_ratio=5,
                min_token_text_ratio=0,
            )
        )
        # The same loop over the graph: [sos, text, task_id] first, then one token a step.
        sos, task = tables["llm_embedding"][0:1], tables["llm_embedding"][1:2]
        step = np.concatenate([sos, tables["text_embedding"][text[0].numpy()], task])[None]
        past = {name: np.zeros((1, 2, 0, 16), np.float32) for name in past_names}
        tokens, length = [], 0
        for _ in range(5 * 7):
            length += step.shape[1]
            logp, *present = session.run(
                None,
                {"inputs_embeds": step, "attention_mask": np.ones((1, length), np.int64), **past},
            )
            past = dict(zip(past_names, present, strict=True))
            token = int(logp[0].argmax())
            if token == SPEECH_VOCABULARY:  # the stop token
                break
            if token > SPEECH_VOCABULARY:
                continue
            tokens.append(token)
            step = tables["speech_embedding"][token][None, None]
        assert len(expected) > 5 and tokens == expected


@pytest.fixture(scope="module")
def flow(estimator):
    """CosyVoice 2's flow (`CausalMaskedDiffWithXvec`) with a tiny encoder (its width is fixed
    at 512) around the tiny estimator."""
    import torch
    from omegaconf import DictConfig

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.flow.flow import CausalMaskedDiffWithXvec
    from cosyvoice.flow.flow_matching import CausalConditionalCFM
    from cosyvoice.transformer.upsample_encoder import UpsampleConformerEncoder

    torch.manual_seed(3)
    encoder = UpsampleConformerEncoder(
        input_size=512,
        output_size=512,
        attention_heads=2,
        linear_units=64,
        num_blocks=1,
        dropout_rate=0.0,
        positional_dropout_rate=0.0,
        attention_dropout_rate=0.0,
        normalize_before=True,
        input_layer="linear",
        pos_enc_layer_type="rel_pos_espnet",
        selfattention_layer_type="rel_selfattn",
        use_cnn_module=False,
        macaron_style=False,
        static_chunk_size=25,
    )
    cfm_params = DictConfig(
        {
            "sigma_min": 1e-06,
            "solver": "euler",
            "t_scheduler": "cosine",
            "training_cfg_rate": 0.2,
            "inference_cfg_rate": 0.7,
            "reg_loss_type": "l1",
        }
    )
    decoder = CausalConditionalCFM(
        in_channels=240, cfm_params=cfm_params, n_spks=1, spk_emb_dim=80, estimator=estimator
    )
    return CausalMaskedDiffWithXvec(
        input_size=512,
        output_size=80,
        spk_embed_dim=192,
        vocab_size=SPEECH_VOCABULARY,
        token_mel_ratio=2,
        pre_lookahead_len=3,
        encoder=encoder,
        decoder=decoder,
    ).eval()


@pytest.mark.parametrize("variant", ["flow_encoder", "flow_encoder_chunk"])
def test_flow_encoder_variants_equal_the_flow_modules(flow, variant, tmp_path):
    import onnxruntime
    import torch

    from edge_build.cosyvoice2_export import FLOW_ENCODER_VARIANTS, export_flow_encoder

    options = FLOW_ENCODER_VARIANTS[variant]
    path = export_flow_encoder(flow, tmp_path / f"{variant}.onnx", **options)
    session = onnxruntime.InferenceSession(str(path))
    generator = torch.Generator().manual_seed(5)
    for tokens in (25, 53):
        token = torch.randint(0, SPEECH_VOCABULARY, (1, tokens), generator=generator)
        context = torch.randint(0, SPEECH_VOCABULARY, (1, 3), generator=generator)
        with torch.no_grad():  # the flow's own modules, as flow.inference chains them
            embedded = flow.input_embedding(token)
            extra = {"context": flow.input_embedding(context)} if options["lookahead"] else {}
            hidden, _ = flow.encoder(
                embedded, torch.tensor([tokens]), streaming=options["streaming"], **extra
            )
            expected = flow.encoder_proj(hidden).transpose(1, 2).numpy()
        feeds = {"token": token.numpy()}
        if options["lookahead"]:
            feeds["context"] = context.numpy()
        (mu,) = session.run(None, feeds)
        assert mu.shape == (1, 80, 2 * tokens)
        np.testing.assert_allclose(mu, expected, atol=1e-4)


def test_the_lookahead_changes_the_chunk_end(flow):
    """The next tokens reach the chunk's last frames: a graph that ignored them would pass."""
    import torch

    token = torch.randint(0, SPEECH_VOCABULARY, (1, 25), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        lengths = torch.tensor([25])
        embedded = flow.input_embedding(token)
        last, _ = flow.encoder(embedded, lengths, streaming=True)
        ahead = flow.input_embedding(torch.tensor([[1, 2, 3]]))
        chunk, _ = flow.encoder(embedded, lengths, context=ahead, streaming=True)
    assert np.abs((last - chunk).numpy()).max() > 1e-4
