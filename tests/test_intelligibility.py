"""Speech recognised back to text. pocketsphinx ships an English model in its wheel.

Bound set from measurements (2026-12-02, en_US-joe-medium, default noise): word error rate
over these sentences 0.00-0.13 across runs (one proper noun-heavy sentence loses a few words);
reversed speech and noise score >= 0.89. The bound of 0.30 fails clearly on either control.
"""

import jiwer
import numpy as np
import pytest
import soxr

from tests.conftest import EMBEDDED_RATE

pytestmark = pytest.mark.slow  # speech recognition over the voice's audio

SENTENCES = [
    "The weather today is sunny and warm.",
    "Please close the door when you leave the room.",
    "The next train to the city center leaves in five minutes.",
    "Welcome home. The front door is now unlocked and the lights are on.",
]
MAX_WER = 0.30
_normalise = jiwer.Compose(
    [jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(), jiwer.Strip()]
)


@pytest.fixture(scope="module")
def decoder():
    from pocketsphinx import Decoder

    return Decoder(samprate=16000, loglevel="FATAL")


def transcribe(decoder, samples: np.ndarray, rate: int) -> str:
    pcm = soxr.resample(samples.astype(np.float32), rate, 16000)
    decoder.start_utt()
    decoder.process_raw((np.clip(pcm, -1, 1) * 32767).astype(np.int16).tobytes(), full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    return hypothesis.hypstr if hypothesis else ""


def corpus_wer(decoder, audio: list[np.ndarray]) -> float:
    hypotheses = [_normalise(transcribe(decoder, a, EMBEDDED_RATE)) or "<nothing>" for a in audio]
    return jiwer.wer([_normalise(s) for s in SENTENCES], hypotheses)


@pytest.fixture(scope="module")
def spoken(synthesizer) -> list[np.ndarray]:
    return [np.concatenate([c.samples for c in synthesizer.synthesize(s)]) for s in SENTENCES]


def test_speech_is_recognised_as_the_input_text(decoder, spoken):
    assert corpus_wer(decoder, spoken) <= MAX_WER


def test_control_reversed_speech_fails_the_check(decoder, spoken):
    assert corpus_wer(decoder, [a[::-1].copy() for a in spoken]) > MAX_WER


def test_control_noise_fails_the_check(decoder, spoken):
    rng = np.random.default_rng(7)
    noise = [rng.normal(0, 0.3, len(a)).astype(np.float32) for a in spoken]
    assert corpus_wer(decoder, noise) > MAX_WER
