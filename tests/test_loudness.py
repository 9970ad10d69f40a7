"""Loudness decided before audio: the look-ahead limiter on pieces of any size, and the embedded
voice with the gain `fastvoice build` measured (EBU R128, pyloudnorm): every sentence streams,
no peak passes the ceiling, and sentences are more even than under Piper's peak normalisation."""

from __future__ import annotations

import itertools

import numpy as np
import pyloudnorm
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.audio.limiter import LookaheadLimiter
from daemon.config import parse_config
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices import loudness
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry
from edge_build.build import build_voices
from tests.conftest import EMBEDDED_RATE

pytestmark = pytest.mark.slow  # measures loudness over built voices

RATE = EMBEDDED_RATE
CEILING = loudness.CEILING
SILENT_NOISE = SpeechOptions(noise_scale=0.0, noise_w=0.0)
ANNOUNCEMENTS = (
    "Welcome.",
    "The next train to the airport leaves from platform four.",
    "Please keep your belongings with you at all times.",
    "The museum closes in fifteen minutes.",
    "Attention please: the store will close at nine tonight.",
)


def limited(audio: np.ndarray, cuts: list[int]) -> np.ndarray:
    limiter = LookaheadLimiter(RATE, CEILING)
    bounds = [0, *sorted(set(cuts)), len(audio)]
    pieces = [
        limiter.process(audio[start:end], end == len(audio))
        for start, end in itertools.pairwise(bounds)
    ]
    return np.concatenate(pieces)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(1, 6000),
    loudest=st.floats(0.1, 4.0),
    cuts=st.lists(st.integers(0, 6000), max_size=6),
)
def test_the_limiter_never_passes_the_ceiling_however_the_audio_is_cut(seed, length, loudest, cuts):
    rng = np.random.default_rng(seed)
    audio = (rng.standard_normal(length) * loudest / 3).astype(np.float32)
    cuts = [cut for cut in cuts if 0 < cut < length]
    out = limited(audio, cuts)
    assert out.shape == audio.shape
    assert np.abs(out).max() <= CEILING + 1e-6
    np.testing.assert_allclose(out, limited(audio, []), atol=1e-6)  # the cuts change nothing
    # Gains only ever turn down, and by no more than each sample's own peak needs to its window.
    assert np.all(np.abs(out) <= np.abs(audio) + 1e-7)


def test_the_limiter_leaves_quiet_audio_exactly_as_it_was():
    audio = (0.5 * np.sin(np.arange(5000) / 7)).astype(np.float32)
    np.testing.assert_array_equal(limited(audio, [100, 2000]), audio)


def test_a_lone_peak_is_turned_down_smoothly_around_it():
    audio = np.full(4000, 0.2, dtype=np.float32)
    audio[2000] = 2.0
    out = limited(audio, [1990])
    gain = out / audio
    assert out[2000] == pytest.approx(CEILING, abs=1e-6)
    assert np.max(np.abs(np.diff(gain))) < 0.02  # over L samples, no step: no click
    assert gain[0] == 1.0 and gain[-1] == 1.0


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Artifacts and loudness of the embedded voice after `fastvoice build` (fp32: short)."""
    store = tmp_path_factory.mktemp("store")
    config = parse_config({"runtime": {"precision": "fp32", "artifact_dir": str(store)}})
    results = build_voices(config, store)
    assert any(r.stage.endswith("/loudness") and r.status.startswith("measured") for r in results)
    return store


@pytest.fixture(scope="module")
def measured(store):
    config = parse_config({"runtime": {"artifact_dir": str(store)}})
    return VoiceRegistry(config, OrtCpuBackend(artifact_store=store)).get()


@pytest.fixture(scope="module")
def peak_normalised(store, tmp_path_factory):
    """The same streaming artifacts, with no loudness measurement where the voice looks."""
    config = parse_config({"runtime": {"artifact_dir": str(tmp_path_factory.mktemp("none"))}})
    return VoiceRegistry(config, OrtCpuBackend(artifact_store=store)).get()


def levels(voice) -> list[float]:
    meter = pyloudnorm.Meter(RATE)
    return [
        meter.integrated_loudness(
            np.concatenate([p.samples for p in voice.synthesize_sentence(text, SILENT_NOISE)])
        )
        for text in ANNOUNCEMENTS[1:]  # "Welcome." is shorter than the meter's 400 ms block
    ]


def test_with_a_measured_gain_short_sentences_stream_and_stay_under_the_ceiling(measured):
    assert measured.loudness is not None
    pieces = list(measured.synthesize_sentence(ANNOUNCEMENTS[3], SILENT_NOISE))
    assert len(pieces) >= 2 and not pieces[0].sentence_end and pieces[-1].sentence_end
    assert pieces[0].samples.size < sum(p.samples.size for p in pieces) / 3
    audio = np.concatenate([p.samples for p in pieces])
    assert np.abs(audio).max() <= CEILING + 1e-6


def test_without_a_measurement_a_short_sentence_waits_for_its_end(peak_normalised):
    assert peak_normalised.loudness is None and peak_normalised.streaming
    pieces = list(peak_normalised.synthesize_sentence(ANNOUNCEMENTS[3], SILENT_NOISE))
    assert len(pieces) == 1


def test_the_measured_gain_keeps_sentences_more_even_than_peak_normalisation(
    measured, peak_normalised
):
    gained, peaked = levels(measured), levels(peak_normalised)
    assert max(gained) - min(gained) < max(peaked) - min(peaked)
    assert abs(np.mean(gained) - loudness.TARGET_LUFS) < 1.5


def test_a_measurement_changes_the_phrase_cache_key(measured, peak_normalised):
    """Phrases cached before the voice was measured are not played at their old level."""
    assert measured.identity()["loudness"] is not None
    assert peak_normalised.identity()["loudness"] is None
    assert {k: v for k, v in measured.identity().items() if k != "loudness"} == {
        k: v for k, v in peak_normalised.identity().items() if k != "loudness"
    }
