"""CosyVoice 2 stages to ONNX (extra `export`: PyTorch and the model classes of
`cosyvoice-minicpmo`), from model objects in memory; edge_build/cosyvoice2_pack.py puts them in
a voice pack.

Each is checked against PyTorch on tiny random-weight models (tests/test_cosyvoice2_export.py):
the speech-token LLM as one step with explicit KV-cache inputs and outputs, and its embedding
tables; the flow encoder whole and as a streamed chunk with lookahead; the flow-matching
estimator, whole and chunk-causal (they differ numerically: different attention masks); the
HiFT vocoder as its source (random draws as inputs) and its filter up to magnitude and phase
(the iSTFT has no ONNX op and runs in numpy: daemon/voices/hift.py).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import sys
import types
from collections.abc import Iterator
from pathlib import Path

from daemon.voices.voice_pack import llm_cache_names

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
    frame_axis = {2: "mel_frames"}  # named as gpu.profiles names it
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
    imported by cosyvoice's file utilities, and not installable beside this torch), whisper and
    tiktoken (only for CosyVoice 1's tokenizer, beside CosyVoice 2's) and matcha's training
    utilities (hydra, lightning). A stand-in exists only while the one module that needs it is
    imported: transformers looks torchaudio up at import and a stand-in breaks it."""
    _import_with_stand_ins("cosyvoice.utils.file_utils", ["torchaudio"])
    importlib.import_module("transformers")  # before the stand-ins: it probes for tiktoken
    _import_with_stand_ins(
        "cosyvoice.tokenizer.tokenizer", ["whisper", "whisper.tokenizer", "tiktoken"]
    )
    if "matcha.utils.pylogger" not in sys.modules:
        pylogger = types.ModuleType("matcha.utils.pylogger")
        pylogger.get_pylogger = logging.getLogger  # type: ignore[attr-defined]
        utils = types.ModuleType("matcha.utils")
        utils.pylogger = pylogger  # type: ignore[attr-defined]
        sys.modules["matcha.utils"] = utils
        sys.modules["matcha.utils.pylogger"] = pylogger


def _import_with_stand_ins(module: str, absent: list[str]) -> None:
    if module in sys.modules:
        return
    stand_ins = [name for name in absent if name not in sys.modules]
    for name in stand_ins:
        sys.modules[name] = types.ModuleType(name)
    if "whisper.tokenizer" in stand_ins:
        sys.modules["whisper.tokenizer"].Tokenizer = object  # type: ignore[attr-defined]
    try:
        importlib.import_module(module)
    finally:
        for name in stand_ins:
            del sys.modules[name]


@contextlib.contextmanager
def injected_draws(initial_phases, noise) -> Iterator[None]:
    """HiFT's source module draws random numbers (the harmonics' initial phases, additive
    noise): while this is active they are the given tensors instead, so that the exported graph
    takes them as inputs and PyTorch, run as the reference, makes the same sound."""
    import torch

    real_rand, real_randn_like = torch.rand, torch.randn_like

    def rand(*shape, **options):
        return initial_phases.clone()  # the source module zeroes the fundamental's in place

    def randn_like(tensor, **options):
        # The noise branch of the same shape as the voicing flags is drawn and thrown away.
        return noise if tuple(tensor.shape) == tuple(noise.shape) else torch.zeros_like(tensor)

    torch.rand, torch.randn_like = rand, randn_like
    try:
        yield
    finally:
        torch.rand, torch.randn_like = real_rand, real_randn_like


def stft_as_conv(signal, n_fft: int, hop: int, window):
    """torch.stft(center=True, reflect padding) as a strided convolution with a windowed DFT
    kernel: ONNX has no op for torch.stft's complex output. Returns real and imaginary parts,
    [batch, n_fft // 2 + 1, frames]."""
    import torch

    bins = n_fft // 2 + 1
    angle = (
        2
        * math.pi
        * torch.arange(bins, dtype=torch.float32)[:, None]
        * torch.arange(n_fft, dtype=torch.float32)[None, :]
        / n_fft
    )
    kernel = torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window])[:, None, :]
    padded = torch.nn.functional.pad(signal[:, None, :], (n_fft // 2, n_fft // 2), mode="reflect")
    spectrum = torch.nn.functional.conv1d(padded, kernel, stride=hop)
    return spectrum[:, :bins], spectrum[:, bins:]


def hift_graphs(hift):
    """HiFT as two modules: the source (mel → f0 → harmonic excitation, random draws as inputs)
    and the filter up to magnitude and phase (mel + source → magnitude, phase). The source is
    its own graph because streaming overwrites its start with the previous chunk's (the HiFT
    cache) before the filter runs; the iSTFT runs outside, in numpy."""
    import torch
    import torch.nn.functional as F

    class Source(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hift = hift

        def forward(self, speech_feat, initial_phases, noise):
            with injected_draws(initial_phases, noise):
                f0 = self.hift.f0_predictor(speech_feat)
                source = self.hift.f0_upsamp(f0[:, None]).transpose(1, 2)
                source, _, _ = self.hift.m_source(source)
            return source.transpose(1, 2)

    class MagnitudePhase(torch.nn.Module):
        """HiFTGenerator.decode up to its iSTFT, the source STFT as a convolution."""

        def __init__(self) -> None:
            super().__init__()
            self.hift = hift

        def forward(self, speech_feat, source):
            h = self.hift
            n_fft, hop = h.istft_params["n_fft"], h.istft_params["hop_len"]
            real, imag = stft_as_conv(source.squeeze(1), n_fft, hop, h.stft_window)
            source_stft = torch.cat([real, imag], dim=1)
            x = h.conv_pre(speech_feat)
            for i in range(h.num_upsamples):
                x = h.ups[i](F.leaky_relu(x, h.lrelu_slope))
                if i == h.num_upsamples - 1:
                    x = h.reflection_pad(x)
                x = x + h.source_resblocks[i](h.source_downs[i](source_stft))
                blocks = h.resblocks[i * h.num_kernels : (i + 1) * h.num_kernels]
                x = sum(block(x) for block in blocks) / h.num_kernels
            x = h.conv_post(F.leaky_relu(x))
            bins = n_fft // 2 + 1
            return torch.exp(x[:, :bins, :]), torch.sin(x[:, bins:, :])

    return Source().eval(), MagnitudePhase().eval()


def hift_example(hift, mel_frames: int, seed: int = 0) -> dict:
    """Inputs of HiFT's source graph (torch tensors): mel, initial phases, noise."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    harmonics = hift.nb_harmonics + 1
    samples = mel_frames * samples_per_frame(hift)
    return {
        "speech_feat": torch.randn(1, MEL_BINS, mel_frames, generator=generator),
        "initial_phases": torch.rand(1, harmonics, generator=generator),
        "noise": torch.randn(1, samples, harmonics, generator=generator),
    }


def samples_per_frame(hift) -> int:
    """Waveform samples per mel frame (480 at 24 kHz: 8 x 5 x 3 upsampling, hop 4)."""
    return int(hift.f0_upsamp.scale_factor)


def export_hift(hift, directory: Path, mel_frames: int = 20) -> tuple[Path, Path]:
    """Writes hift_source.onnx and hift_magnitude_phase.onnx; mel frames and samples dynamic."""
    import torch

    source_graph, filter_graph = hift_graphs(hift)
    example = hift_example(hift, mel_frames)
    with torch.no_grad():
        source = source_graph(*example.values())
    source_path = directory / "hift_source.onnx"
    torch.onnx.export(
        source_graph,
        tuple(example.values()),
        str(source_path),
        dynamo=False,
        opset_version=OPSET,
        input_names=list(example),
        output_names=["source"],
        dynamic_axes={
            "speech_feat": {2: "mel_frames"},
            "noise": {1: "samples"},
            "source": {2: "samples"},
        },
    )
    filter_path = directory / "hift_magnitude_phase.onnx"
    torch.onnx.export(
        filter_graph,
        (example["speech_feat"], source),
        str(filter_path),
        dynamo=False,
        opset_version=OPSET,
        input_names=["speech_feat", "source"],
        output_names=["magnitude", "phase"],
        dynamic_axes={
            "speech_feat": {2: "mel_frames"},
            "source": {2: "samples"},
            "magnitude": {2: "stft_frames"},
            "phase": {2: "stft_frames"},
        },
    )
    return source_path, filter_path


def export_llm_step(lm, out: Path) -> Path:
    """The speech-token LLM as one step: `(inputs_embeds [1, S, H], attention_mask [1, P + S],
    past key/values [1, kv_heads, P, head_dim] per layer) -> (logp [1, vocab] of the last
    position, present key/values)`. One graph serves the prompt (S tokens, P = 0) and every
    later step (S = 1): the KV cache stays outside, with whoever decodes."""
    import torch
    from transformers.cache_utils import DynamicCache

    config = lm.llm.model.config
    # Eager attention builds its causal mask from the cache positions, which the graph needs
    # to serve any prompt length (SDPA's shortcut for no mask would be traced in).
    config._attn_implementation = "eager"
    layers = config.num_hidden_layers
    kv_heads = config.num_key_value_heads
    head_dim = config.hidden_size // config.num_attention_heads

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, inputs_embeds, attention_mask, *past):
            cache = DynamicCache.from_legacy_cache(
                tuple((past[2 * i], past[2 * i + 1]) for i in range(layers))
            )
            output = self.lm.llm.model(
                inputs_embeds=inputs_embeds,
                attention_mask=attention_mask,
                past_key_values=cache,
                use_cache=True,
                output_hidden_states=True,
                return_dict=True,
            )
            logp = self.lm.llm_decoder(output.hidden_states[-1][:, -1]).log_softmax(dim=-1)
            present = output.past_key_values.to_legacy_cache()
            return (logp, *[tensor for pair in present for tensor in pair])

    # Traced with a past of 3 and a step of 1: a past of length 0 at trace time would drop
    # the cache inputs from the graph.
    past_names, present_names = llm_cache_names(layers)
    past = [torch.zeros(1, kv_heads, 3, head_dim) for _ in past_names]
    embeds = torch.zeros(1, 1, config.hidden_size)
    mask = torch.ones(1, 4, dtype=torch.int64)
    axes = {"inputs_embeds": {1: "S"}, "attention_mask": {1: "P+S"}}
    axes |= {name: {2: "P"} for name in past_names}
    axes |= {name: {2: "P+S"} for name in present_names}
    torch.onnx.export(
        Step().eval(),
        (embeds, mask, *past),
        str(out),
        dynamo=False,
        opset_version=OPSET,
        input_names=["inputs_embeds", "attention_mask", *past_names],
        output_names=["logp", *present_names],
        dynamic_axes=axes,
    )
    return out


def embedding_tables(lm) -> dict:
    """The tables the decoding loop looks tokens up in (numpy): text (the Qwen embedding),
    speech tokens, and the LLM's own two (sos/eos and task id)."""
    return {
        "text_embedding": lm.llm.model.model.embed_tokens.weight.detach().numpy(),
        "speech_embedding": lm.speech_embedding.weight.detach().numpy(),
        "llm_embedding": lm.llm_embedding.weight.detach().numpy(),
    }


# The flow encoder's two uses: a whole utterance (and a stream's last chunk, which the reference
# runs whole); a streamed chunk, which reads the next pre-lookahead tokens as context.
FLOW_ENCODER_VARIANTS = {
    "flow_encoder": {"streaming": False, "lookahead": False},
    "flow_encoder_chunk": {"streaming": True, "lookahead": True},
}


def export_flow_encoder(flow, out: Path, streaming: bool, lookahead: bool) -> Path:
    """Speech tokens [1, N] (and with `lookahead` the next tokens [1, pre_lookahead_len]) →
    `mu` [1, 80, 2N]: the token embedding, the upsampling Conformer encoder and its projection
    of CosyVoice 2's flow (`CausalMaskedDiffWithXvec`)."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.flow = flow

        def forward(self, token, *context):
            f = self.flow
            lengths = torch.full((1,), token.shape[1], dtype=torch.long)
            embedded = f.input_embedding(torch.clamp(token, min=0))
            if lookahead:
                ahead = f.input_embedding(torch.clamp(context[0], min=0))
                hidden, _ = f.encoder(embedded, lengths, context=ahead, streaming=streaming)
            else:
                hidden, _ = f.encoder(embedded, lengths, streaming=streaming)
            return f.encoder_proj(hidden).transpose(1, 2)

    token = torch.zeros(1, 30, dtype=torch.long)
    names = ["token", "context"] if lookahead else ["token"]
    example = (token, torch.zeros(1, flow.pre_lookahead_len, dtype=torch.long))
    torch.onnx.export(
        Encoder().eval(),
        example[: len(names)],
        str(out),
        dynamo=False,
        opset_version=OPSET,
        input_names=names,
        output_names=["mu"],
        dynamic_axes={"token": {1: "N"}, "mu": {2: "M"}},
    )
    return out
