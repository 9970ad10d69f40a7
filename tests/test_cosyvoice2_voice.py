"""A CosyVoice 2 voice pack, exported by `fastvoice export` from a model directory in the
reference's layout (tiny random weights, tests/data/cosyvoice2-tiny.yaml), speaks as the
reference pipeline does: the tokenizer, RAS sampling, the whole utterance and the stream chunk
by chunk. The reference is CosyVoice's own `CosyVoice2Model` on the same weights, fed the
random numbers the voice drew. Run in the export environment (`-m cosyvoice`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from daemon.config import CosyVoice2VoiceConfig
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices import cosyvoice2
from daemon.voices.base import SpeechOptions
from daemon.voices.sampling import Draws, pick, ras_sample

pytestmark = pytest.mark.cosyvoice

DATA = Path(__file__).parent / "data"
TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "Please stand clear of the closing doors.",
    "The next train to the airport leaves from platform four at ten past nine.",
    "Attention please: the museum closes in fifteen minutes.",
]
# About 60 text tokens: the LLM then makes at least 120 speech tokens, several streamed chunks.
LONG_TEXT = (
    "Attention please, the next train to the airport leaves from platform four at ten past "
    "nine, and passengers for the museum should change at the central station."
)
SHORT_TEXT = "Please stand clear of the doors."


def qwen_directory(directory: Path) -> None:
    """A tiny Qwen2 backbone and a byte-level BPE tokenizer in the layout of CosyVoice's
    `CosyVoice-BlankEN` (vocab.json, merges.txt, tokenizer_config.json, the model)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2ForCausalLM

    from tests.cosyvoice2_tiny import tiny_qwen_config

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=330,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
    )
    tokenizer.train_from_iterator(TRAINING_TEXT * 20, trainer)
    directory.mkdir(parents=True)
    tokenizer.model.save(str(directory))
    (directory / "tokenizer_config.json").write_text(
        '{"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", '
        '"unk_token": null, "bos_token": null, "pad_token": "<|endoftext|>"}'
    )
    torch.manual_seed(2)
    # The vocabulary holds the BPE, its added special tokens and CosyVoice's.
    config = tiny_qwen_config(vocab_size=400, positions=4096)
    Qwen2ForCausalLM(config).save_pretrained(str(directory))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A CosyVoice 2 model directory: cosyvoice2.yaml, llm.pt, flow.pt, hift.pt, the Qwen
    directory and spk2info.pt with a zero-shot speaker (prompt and embedding) and an SFT one
    (embedding only)."""
    import torch
    from hyperpyyaml import load_hyperpyyaml

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    directory = tmp_path_factory.mktemp("CosyVoice2-tiny")
    qwen_directory(directory / "CosyVoice-BlankEN")
    text = (DATA / "cosyvoice2-tiny.yaml").read_text()
    (directory / "cosyvoice2.yaml").write_text(text)
    from edge_build.cosyvoice2_pack import model_yaml

    torch.manual_seed(0)
    built = load_hyperpyyaml(
        model_yaml(text), overrides={"qwen_pretrain_path": str(directory / "CosyVoice-BlankEN")}
    )
    for name in ("llm", "flow", "hift"):
        torch.save(built[name].state_dict(), directory / f"{name}.pt")
    generator = torch.Generator().manual_seed(7)
    prompt_tokens = torch.randint(0, 100, (1, 13), generator=generator, dtype=torch.int32)
    embedding = torch.randn(1, 192, generator=generator)
    speakers = {
        "prompted": {
            "prompt_text": torch.randint(0, 300, (1, 9), generator=generator, dtype=torch.int32),
            "prompt_text_len": torch.tensor([9], dtype=torch.int32),
            "llm_prompt_speech_token": prompt_tokens,
            "llm_prompt_speech_token_len": torch.tensor([13], dtype=torch.int32),
            "flow_prompt_speech_token": prompt_tokens,
            "flow_prompt_speech_token_len": torch.tensor([13], dtype=torch.int32),
            "prompt_speech_feat": torch.randn(1, 26, 80, generator=generator),
            "prompt_speech_feat_len": torch.tensor([26], dtype=torch.int32),
            "llm_embedding": embedding,
            "flow_embedding": embedding,
        },
        "plain": {"embedding": torch.randn(1, 192, generator=generator)},
    }
    torch.save(speakers, directory / "spk2info.pt")
    return directory


@pytest.fixture(scope="module")
def pack(model_dir, tmp_path_factory) -> Path:
    """The pack, made by the command a user runs."""
    out = tmp_path_factory.mktemp("packs") / "tiny-pack"
    fastvoice = Path(sys.executable).with_name("fastvoice")
    done = subprocess.run(
        [str(fastvoice), "export", "cosyvoice2", str(model_dir), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote the voice pack" in done.stdout
    return out


@pytest.fixture(scope="module")
def reference(model_dir):
    """The reference models, loaded from the model directory the way the exporter loads it."""
    from edge_build.cosyvoice2_pack import load_models

    return load_models(model_dir)


def make_voice(pack: Path, **settings) -> cosyvoice2.CosyVoice2Voice:
    config = CosyVoice2VoiceConfig(pack=pack, **settings)
    return cosyvoice2.CosyVoice2Voice("tiny", config, OrtCpuBackend(artifact_store=None))


class RecordingDraws(Draws):
    """The voice's own draws, kept so that the reference can be handed the same numbers."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.uniforms: list[float] = []
        self.phase_draws: list[np.ndarray] = []
        self.noise_draws: list[np.ndarray] = []

    def uniform(self) -> float:
        self.uniforms.append(super().uniform())
        return self.uniforms[-1]

    def phases(self, harmonics: int) -> np.ndarray:
        self.phase_draws.append(super().phases(harmonics))
        return self.phase_draws[-1]

    def noise(self, samples: int, harmonics: int) -> np.ndarray:
        self.noise_draws.append(super().noise(samples, harmonics))
        return self.noise_draws[-1]


def speak(voice, text: str, monkeypatch, speaker: str = "prompted"):
    """The voice's chunks of `text`, and the draws it made."""
    made: list[RecordingDraws] = []

    def recording(seed: int) -> RecordingDraws:
        made.append(RecordingDraws(seed))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(cosyvoice2, "Draws", recording)
        pieces = list(voice.synthesize_sentence(text, SpeechOptions(speaker=speaker)))
    assert len(made) == 1 and pieces and pieces[-1].sentence_end
    assert not any(piece.sentence_end for piece in pieces[:-1])
    return [piece.samples for piece in pieces], made[0]


@contextlib.contextmanager
def replayed(draws: RecordingDraws):
    """The reference's random draws are the voice's: multinomial draws (sampling) invert the
    same uniforms, HiFT's source takes the same phases and noise. Every draw must be used."""
    import torch

    uniforms = list(draws.uniforms)
    phases, noises = list(draws.phase_draws), list(draws.noise_draws)
    real = torch.Tensor.multinomial, torch.rand, torch.randn_like

    def multinomial(weights, num_samples, replacement=False):
        return torch.tensor([pick(weights.detach().numpy(), uniforms.pop(0))])

    def rand(*shape, **options):
        return torch.from_numpy(phases.pop(0)).clone()

    def randn_like(tensor, **options):
        if noises and tuple(tensor.shape) == noises[0].shape:
            return torch.from_numpy(noises.pop(0))
        return torch.zeros_like(tensor)  # the voicing flags' noise, drawn and thrown away

    torch.Tensor.multinomial, torch.rand, torch.randn_like = multinomial, rand, randn_like
    try:
        yield
    finally:
        torch.Tensor.multinomial, torch.rand, torch.randn_like = real
    assert not uniforms and not phases and not noises


def reference_chunks(
    models, model_dir: Path, text_ids: list[int], stream: bool, growth: int = 1
) -> list[np.ndarray]:
    """CosyVoice2Model.tts on the speaker "prompted"; `growth` > 1 grows the hop after each
    chunk as upstream CosyVoice does (`stream_scale_factor`, up to 100 tokens)."""
    import torch

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.cli.model import CosyVoice2Model

    model = CosyVoice2Model(models.llm, models.flow, models.hift)
    model.llm = models.llm  # CosyVoice2Model leaves the LLM to its caller
    token2wav = model.token2wav

    def growing(*args, **kwargs):
        speech = token2wav(*args, **kwargs)
        if not kwargs.get("finalize"):
            model.token_hop_len = min(100, model.token_hop_len * growth)
        return speech

    model.token2wav = growing
    speaker = torch.load(model_dir / "spk2info.pt")["prompted"]
    chunks = model.tts(
        text=torch.tensor([text_ids], dtype=torch.int32),
        flow_embedding=speaker["flow_embedding"],
        llm_embedding=speaker["llm_embedding"],
        prompt_text=speaker["prompt_text"],
        llm_prompt_speech_token=speaker["llm_prompt_speech_token"],
        flow_prompt_speech_token=speaker["flow_prompt_speech_token"],
        prompt_speech_feat=speaker["prompt_speech_feat"],
        stream=stream,
    )
    return [chunk["tts_speech"].numpy()[0] for chunk in chunks]


def test_the_pack_tokenizes_as_cosyvoice(pack, model_dir):
    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.tokenizer.tokenizer import QwenTokenizer

    reference = QwenTokenizer(str(model_dir / "CosyVoice-BlankEN"))
    voice = make_voice(pack)
    for text in (LONG_TEXT, "Doors [breath] closing, <strong>now</strong>!", "Zürich 42 €"):
        ids = voice.text_tokens(text)
        assert ids == reference.encode(text)
    assert len(voice.text_tokens("[breath]")) == 1  # CosyVoice's added tokens stay whole


def test_ras_sampling_equals_the_reference():
    """Given the same uniforms, RAS picks what CosyVoice's ras_sampling picks: within the
    nucleus, and from the whole distribution when the pick repeats a recent token."""
    import torch

    from edge_build.cosyvoice2_export import import_cosyvoice

    import_cosyvoice()
    from cosyvoice.utils.common import ras_sampling

    generator = np.random.default_rng(3)
    resampled = 0
    for case in range(200):
        logp = torch.log_softmax(torch.from_numpy(generator.normal(0, 3, 103)).float(), 0)
        likely = np.argsort(-logp.numpy())[:4]  # histories that the nucleus pick may repeat
        decoded = [int(t) for t in generator.choice(likely, int(generator.integers(0, 15)))]
        draws = RecordingDraws(case)
        ours = ras_sample(logp.numpy(), decoded, draws)
        resampled += len(draws.uniforms) == 2
        with replayed(draws):
            theirs = int(ras_sampling(logp, decoded, 25).item())
        assert ours == theirs
    assert 10 < resampled < 190  # both rules were exercised


def test_whole_utterance_equals_the_reference(pack, model_dir, reference, monkeypatch):
    import torch

    voice = make_voice(pack, streaming=False)
    (audio,), draws = speak(voice, LONG_TEXT, monkeypatch)
    with replayed(draws), torch.no_grad():
        (expected,) = reference_chunks(reference, model_dir, voice.text_tokens(LONG_TEXT), False)
    assert audio.shape == expected.shape
    assert audio.shape[0] >= 2 * 60 * 2 * 480  # at least 2 speech tokens per text token
    np.testing.assert_allclose(audio, expected, atol=1e-5)  # peaks ~0.07, errors ~1e-7


@pytest.mark.parametrize("growth", [1, 2], ids=["fixed-hop", "growing-hop"])
def test_stream_equals_the_reference_chunk_by_chunk(
    pack, model_dir, reference, monkeypatch, growth
):
    import torch

    voice = make_voice(pack, streaming=True, token_hop_growth=growth)
    chunks, draws = speak(voice, LONG_TEXT, monkeypatch)
    with replayed(draws), torch.no_grad():
        expected = reference_chunks(
            reference, model_dir, voice.text_tokens(LONG_TEXT), True, growth
        )
    assert len(chunks) == len(expected) >= 3
    for got, want in zip(chunks, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5)
    # The first chunk: prompt (13) + hop padded to 50 tokens, less the 8 cached mel frames.
    assert chunks[0].shape[0] == (37 * 2 - 8) * 480


def test_a_seed_fixes_the_sound_and_another_changes_it(pack):
    def audio(seed: int) -> np.ndarray:
        voice = make_voice(pack, streaming=False, seed=seed)
        return np.concatenate(
            [p.samples for p in voice.synthesize_sentence(SHORT_TEXT, SpeechOptions())]
        )

    first, again, other = audio(1), audio(1), audio(2)
    np.testing.assert_array_equal(first, again)
    assert first.shape != other.shape or np.abs(first - other).max() > 1e-3


def test_concurrent_requests_share_nothing(pack):
    """Two streams at once sound as each does alone: no state between requests."""
    voice = make_voice(pack, streaming=True)

    def spoken(text: str) -> np.ndarray:
        return np.concatenate(
            [p.samples for p in voice.synthesize_sentence(text, SpeechOptions(speaker="plain"))]
        )

    alone = {text: spoken(text) for text in (LONG_TEXT, SHORT_TEXT)}
    together: dict[str, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda t=text: together.__setitem__(t, spoken(t))) for text in alone
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for text, audio in alone.items():
        np.testing.assert_array_equal(together[text], audio)


def test_fastvoice_say_speaks_with_the_pack(pack, tmp_path):
    import wave

    config = tmp_path / "fastvoice.yaml"
    config.write_text(
        "voice: tiny\n"
        "voices:\n"
        f"  tiny: {{family: cosyvoice2, pack: {pack}, speaker: plain}}\n"
        f"runtime: {{artifact_dir: {tmp_path / 'artifacts'}}}\n"
    )
    out = tmp_path / "out.wav"
    fastvoice = Path(sys.executable).with_name("fastvoice")
    done = subprocess.run(
        [str(fastvoice), "say", "--config", str(config), "-o", str(out), SHORT_TEXT],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FASTVOICE_CONFIG": ""},
    )
    assert done.returncode == 0, done.stderr
    with wave.open(str(out)) as wav:
        assert wav.getframerate() == 24000
        assert wav.getnframes() > 0.2 * 24000
    done = subprocess.run(
        [
            str(fastvoice),
            "say",
            "--config",
            str(config),
            "--length-scale",
            "1.2",
            "-o",
            str(out),
            SHORT_TEXT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "does not take length_scale" in done.stderr


def test_fastvoice_build_optimises_the_pack_and_it_sounds_the_same(pack, tmp_path):
    from daemon.config import parse_config
    from daemon.errors import VoiceError
    from daemon.voices.voice_pack import GRAPHS, graph_file
    from edge_build.build import build_cpu_voices

    voice = {"family": "cosyvoice2", "pack": str(pack), "streaming": False}
    config = parse_config({"voice": "tiny", "voices": {"tiny": voice}})
    store = tmp_path / "artifacts"
    assert [r.status for r in build_cpu_voices(config, store, verify=True)] == ["built"] * 7
    assert {r.status for r in build_cpu_voices(config, store, verify=True)} == {"up to date"}
    backend = OrtCpuBackend(artifact_store=store)
    for graph in GRAPHS:
        assert backend.find_artifact(pack / graph_file(graph))[0] is not None

    def audio(backend) -> np.ndarray:
        voice = cosyvoice2.CosyVoice2Voice("tiny", config.voices["tiny"], backend)
        return np.concatenate(
            [p.samples for p in voice.synthesize_sentence(SHORT_TEXT, SpeechOptions())]
        )

    np.testing.assert_allclose(audio(backend), audio(OrtCpuBackend(artifact_store=None)), atol=1e-4)
    copy = tmp_path / "copy"
    shutil.copytree(pack, copy)
    table = copy / "flow_noise.npy"
    data = bytearray(table.read_bytes())
    data[-1] ^= 0xFF  # same size: only the checksum can tell, checked whenever it is opened
    table.write_bytes(bytes(data))
    corrupted = parse_config({"voice": "tiny", "voices": {"tiny": {**voice, "pack": str(copy)}}})
    with pytest.raises(VoiceError, match=r"flow_noise\.npy is damaged"):
        build_cpu_voices(corrupted, store)


def test_gpu_build_makes_fp16_copies_and_engines_of_the_estimator_and_vocoder(pack, tmp_path):
    """On a GPU box (the stack and the TensorRT builder are test doubles, see gpu_doubles.py;
    the graphs, their fp16 copies and ONNX Runtime are real): the fp16 copies keep Snake's sine
    and division, the source's running sum and the attention's softmax in fp32 and stay close to
    fp32; each engine is asked for the profiles of its named dims."""
    import onnx
    import onnxruntime

    from daemon.config import parse_config
    from edge_build.build import build_gpu_voices
    from edge_build.cosyvoice2_builder import ENGINE_GRAPHS
    from edge_build.precision import GPU_FP32_OPS
    from tests.gpu_doubles import FakeEngineBuilder, fake_gpu_stack

    voice = {"family": "cosyvoice2", "pack": str(pack)}
    config = parse_config({"voice": "tiny", "voices": {"tiny": voice}})
    builder = FakeEngineBuilder()
    store = tmp_path / "artifacts"
    results = build_gpu_voices(config, store, fake_gpu_stack(), engine_builder=builder)
    by_stage = {r.stage: r for r in results}
    assert sorted(by_stage) == sorted(
        f"tiny/{g}/{kind}" for g in ENGINE_GRAPHS for kind in ("onnx@fp16", "trt@fp16")
    )
    assert {r.status for r in results} == {"built"}
    largest = {
        r.label: {spec.name: spec.max for spec in r.profiles[0].inputs} for r in builder.requests
    }
    assert largest["tiny/flow_estimator"]["x"] == (2, 80, 1500)
    assert largest["tiny/hift_source"]["noise"] == (1, 720_000, 9)

    def fp16_copy(graph: str) -> Path:
        return by_stage[f"tiny/{graph}/onnx@fp16"].directory / "model.onnx"

    for graph, must_keep in (
        ("flow_estimator", {"Softmax"}),
        ("hift_source", {"CumSum", "Sin"}),
        ("hift_magnitude_phase", {"Sin", "Div", "Exp"}),
    ):
        model = onnx.shape_inference.infer_shapes(onnx.load(str(fp16_copy(graph))))
        types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
        kept = [n for n in model.graph.node if n.op_type in GPU_FP32_OPS]
        assert {n.op_type for n in kept} >= must_keep, graph
        for node in kept:
            assert types.get(node.output[0]) != onnx.TensorProto.FLOAT16, (graph, node.name)
    rng = np.random.default_rng(4)
    mel = rng.normal(size=(1, 80, 40)).astype(np.float32)
    source = (0.1 * rng.normal(size=(1, 1, 40 * 480))).astype(np.float32)
    outputs = []
    for path in (pack / "hift_magnitude_phase.onnx", fp16_copy("hift_magnitude_phase")):
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, {"speech_feat": mel, "source": source})[0])
    error = np.linalg.norm(outputs[1] - outputs[0]) / np.linalg.norm(outputs[0])
    assert error < 0.05
