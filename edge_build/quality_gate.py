"""The quality gate for precision variants: a variant is used only if it sounds like fp32 (the
graph as the voice ships it).

Each variant speaks its family's gate set (`GateSet`) with noise off (so fp32's output is a
fixed reference) and must keep every utterance's length within 1 %, and, as the set asks, stay
within a log-spectral distance of fp32, keep a wideband PESQ against it (the `pesq` package,
where installed: it has no wheels, so a box without a compiler judges without it), and (when
pocketsphinx is installed, for English) not raise the word error rate by more than 0.05. Of the
variants that pass, `precision: auto` takes the fastest, and a lower precision only when it is
at least 10 % faster than fp32 on this box, timed side by side: the speed is measured here, not
assumed (a variant that is no faster, like fp16 folded back to fp32 by the CPU optimiser,
measured up to 5 % either way).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from daemon.errors import FastvoiceError
from daemon.voices.base import SpeechOptions, Voice

CALIBRATION = (
    "Turn left at the next corner.",
    "The train now arriving at platform four is the delayed service to the airport, calling "
    "at every station along the river.",
    "Please keep your belongings with you at all times, and have a pleasant journey.",
)
SILENT_NOISE = SpeechOptions(noise_scale=0.0, noise_w=0.0)
MAX_LENGTH_CHANGE = 0.01
# fp32 against itself: 0 dB; an audible change (a different voice quality, a buzz) is several
# dB. Half-precision rounding of a VITS voice measures well under 1 dB.
MAX_LOG_SPECTRAL_DISTANCE_DB = 1.5
MAX_WER_INCREASE = 0.05
MIN_SPEEDUP = 1.10
TIMING_ROUNDS = 5
FRAME, HOP, FLOOR_DB = 1024, 256, 80.0


Transcribe = Callable[[np.ndarray, int], str]
PesqScore = Callable[[np.ndarray, np.ndarray, int], float]
# Where PESQ is missing: a record says so, and how to add it.
PESQ_MISSING = (
    "PESQ not measured: the pesq package is not installed (extra `gate`, needs a compiler)"
)


@dataclass
class Verdict:
    precision: str
    passed: bool
    reason: str
    log_spectral_distance_db: float | None = None
    wer: float | None = None
    seconds: float | None = None  # median time to speak the calibration set
    pesq: float | None = None  # the lowest over the gate set, when the set asks for it

    def as_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def log_spectral_distance_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Mean over frames of the RMS difference of the two power spectra in dB, each floored at
    80 dB below its peak so that silence does not dominate."""
    length = min(len(reference), len(candidate))
    if length < FRAME:
        return float(np.sqrt(np.mean((reference[:length] - candidate[:length]) ** 2)))
    window = np.hanning(FRAME).astype(np.float32)

    def spectrum_db(samples: np.ndarray) -> np.ndarray:
        starts = range(0, length - FRAME + 1, HOP)
        frames = np.stack([samples[s : s + FRAME] * window for s in starts])
        power = 10 * np.log10(np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-12)
        return np.maximum(power, power.max() - FLOOR_DB)

    difference = spectrum_db(reference) - spectrum_db(candidate)
    return float(np.mean(np.sqrt(np.mean(difference**2, axis=1))))


def worst_block_snr_db(
    reference: np.ndarray, candidate: np.ndarray, block: int = 512, quiet_db: float = -40.0
) -> float:
    """The lowest signal-to-difference ratio of any block of `block` samples louder than
    `quiet_db` below the reference's peak: a fault confined to a few milliseconds (a click at
    a seam) that means over the whole sentence (PESQ, the spectral distance) average away."""
    length = min(len(reference), len(candidate)) // block * block
    if length == 0:
        return float("inf")
    peak = float(np.max(np.abs(reference[:length]))) or 1.0
    signal = reference[:length].reshape(-1, block) / peak
    difference = signal - candidate[:length].reshape(-1, block) / peak
    loudness = np.sqrt(np.mean(signal**2, axis=1))
    error = np.sqrt(np.mean(difference**2, axis=1))
    heard = 20 * np.log10(loudness + 1e-12) > quiet_db
    if not heard.any():
        return float("inf")
    return float(np.min(20 * np.log10(loudness[heard] / (error[heard] + 1e-15))))


def transcriber() -> Transcribe | None:
    """pocketsphinx's English decoder, or None when it is not installed."""
    try:
        import jiwer  # noqa: F401  (word_error_rate)
        import soxr
        from pocketsphinx import Decoder
    except ImportError:
        return None
    decoder = Decoder(samprate=16000, loglevel="FATAL")

    def transcribe(samples: np.ndarray, rate: int) -> str:
        pcm = soxr.resample(samples.astype(np.float32), rate, 16000)
        decoder.start_utt()
        decoder.process_raw((np.clip(pcm, -1, 1) * 32767).astype(np.int16).tobytes(), True)
        decoder.end_utt()
        hypothesis = decoder.hyp()
        return hypothesis.hypstr if hypothesis else ""

    return transcribe


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    import jiwer

    clean = jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.Strip()])
    return jiwer.wer([clean(r) for r in references], [clean(h) or "<nothing>" for h in hypotheses])


def no_transcriber() -> Transcribe | None:
    return None


def pesq_scorer() -> PesqScore | None:
    """`wideband_pesq`, or None where the `pesq` package is not installed: it is built from
    source on every platform (no wheels), and a box has no compiler."""
    try:
        import pesq  # noqa: F401  (wideband_pesq)
    except ImportError:
        return None
    return wideband_pesq


@dataclass(frozen=True)
class GateSet:
    """What a family's variants are judged on: sentences, the options they are spoken with,
    and the limits (None: measured and written down, not judged)."""

    texts: tuple[str, ...]
    options: SpeechOptions = SILENT_NOISE
    max_log_spectral_distance_db: float | None = MAX_LOG_SPECTRAL_DISTANCE_DB
    min_pesq: float | None = None
    transcriber: Callable[[], Transcribe | None] = field(default=transcriber)
    pesq: Callable[[], PesqScore | None] = field(default=pesq_scorer)


ENGLISH = GateSet(CALIBRATION)


def wideband_pesq(reference: np.ndarray, candidate: np.ndarray, rate: int) -> float:
    """ITU-T P.862.2 (wideband PESQ) of `candidate` against `reference`, at 16 kHz."""
    import soxr
    from pesq import pesq

    length = min(len(reference), len(candidate))
    clean, degraded = (soxr.resample(a[:length], rate, 16000) for a in (reference, candidate))
    return float(pesq(16000, clean, degraded, "wb"))


def _speak(voice: Voice, text: str, options: SpeechOptions = SILENT_NOISE) -> np.ndarray:
    return np.concatenate([p.samples for p in voice.synthesize_sentence(text, options)])


def _time_side_by_side(voices: dict[str, Voice], gate: GateSet) -> dict[str, float]:
    """Shortest time to speak the calibration set, the voices taking turns in every round so
    that the machine's drift hits them alike. The shortest, not the median: on a busy box the
    other jobs only ever add time, and with a variant 15-25 % faster the median of five rounds
    flipped the choice between two builds (Kokoro's int8 measured at 0.75x, then 0.94x)."""
    rounds: dict[str, list[float]] = {name: [] for name in voices}
    for _ in range(TIMING_ROUNDS):
        for name, voice in voices.items():
            started = time.perf_counter()
            for text in gate.texts:
                _speak(voice, text, gate.options)
            rounds[name].append(time.perf_counter() - started)
    return {name: min(times) for name, times in rounds.items()}


def evaluate(
    load: Callable[[str], Voice], candidates: tuple[str, ...], gate: GateSet = ENGLISH
) -> tuple[str, str, list[Verdict]]:
    """(chosen precision, the reason in one line, one verdict per precision, fp32 first)."""
    reference_voice = load("fp32")
    rate = reference_voice.info.sample_rate
    reference = [_speak(reference_voice, text, gate.options) for text in gate.texts]
    transcribe = gate.transcriber()
    wer = None
    if transcribe is not None:
        wer = word_error_rate(list(gate.texts), [transcribe(a, rate) for a in reference])
    verdicts = [Verdict("fp32", True, "reference", 0.0, wer)]
    passing: dict[str, Voice] = {"fp32": reference_voice}
    for precision in candidates:
        verdict, voice = _judge(precision, load, reference, rate, transcribe, verdicts[0], gate)
        verdicts.append(verdict)
        if voice is not None:
            passing[precision] = voice
    seconds = _time_side_by_side(passing, gate)
    for verdict in verdicts:
        verdict.seconds = seconds.get(verdict.precision)
    return _choose(verdicts)


def _judge(
    precision, load, reference, rate, transcribe, fp32: Verdict, gate: GateSet
) -> tuple[Verdict, Voice | None]:
    """The verdict, and the loaded voice when it passed (to be timed)."""
    try:
        voice = load(precision)
        audio = [_speak(voice, text, gate.options) for text in gate.texts]
    except FastvoiceError as error:
        return Verdict(precision, False, f"does not run here: {str(error)[:200]}"), None
    pairs = list(zip(reference, audio, strict=True))
    change = max(abs(len(a) - len(r)) / len(r) for r, a in pairs)
    if change > MAX_LENGTH_CHANGE:
        return Verdict(precision, False, f"durations changed by {change:.1%}"), None
    verdict = Verdict(precision, True, "sounds like fp32")
    verdict.log_spectral_distance_db = max(log_spectral_distance_db(r, a) for r, a in pairs)
    limit = gate.max_log_spectral_distance_db
    if limit is not None and verdict.log_spectral_distance_db > limit:
        return _failed(verdict, f"log-spectral distance {verdict.log_spectral_distance_db:.2f} dB")
    if gate.min_pesq is not None:
        score = gate.pesq()
        if score is None:
            return _failed(verdict, f"asks for PESQ; {PESQ_MISSING}")
        verdict.pesq = min(score(r, a, rate) for r, a in pairs)
        if verdict.pesq < gate.min_pesq:
            return _failed(verdict, f"PESQ {verdict.pesq:.2f} (at least {gate.min_pesq} wanted)")
    if transcribe is not None and fp32.wer is not None:
        verdict.wer = word_error_rate(list(gate.texts), [transcribe(a, rate) for a in audio])
        if verdict.wer > fp32.wer + MAX_WER_INCREASE:
            return _failed(verdict, f"word error rate {verdict.wer:.2f} (fp32 {fp32.wer:.2f})")
    return verdict, voice


def _failed(verdict: Verdict, reason: str) -> tuple[Verdict, None]:
    verdict.passed, verdict.reason = False, reason
    return verdict, None


def _choose(verdicts: list[Verdict]) -> tuple[str, str, list[Verdict]]:
    fp32 = verdicts[0]
    assert fp32.seconds is not None
    chosen = fp32
    for verdict in verdicts[1:]:
        if verdict.passed and verdict.seconds is not None:
            fast_enough = fp32.seconds / verdict.seconds >= MIN_SPEEDUP
            if fast_enough and verdict.seconds < (chosen.seconds or float("inf")):
                chosen = verdict
    parts = []
    for verdict in verdicts[1:]:
        if not verdict.passed:
            parts.append(f"{verdict.precision} failed the gate: {verdict.reason}")
        else:
            ratio = (verdict.seconds or 0) / fp32.seconds
            measured = f"distance {verdict.log_spectral_distance_db:.2f} dB"
            if verdict.pesq is not None:
                measured += f", PESQ {verdict.pesq:.2f}"
            parts.append(f"{verdict.precision} passed ({measured}) at {ratio:.2f}x fp32's time")
    return chosen.precision, f"auto: {chosen.precision} ({'; '.join(parts)})", verdicts
