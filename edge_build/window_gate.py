"""Whether a VITS voice's streamed decode may use fewer context frames than the exact 12 on
this box. Each window then decodes a few frames less twice; its seams differ from the whole
decode by about 6e-4. The gate (issue 40's): the gate sentences decoded in short windows (as
many seams as a slow box makes) against their whole decode, the exact audio: wideband PESQ mean
at least 4.2 and worst at least 4.0, log-spectral distance at most 1.0 dB, word error (ASR)
no worse than the exact audio's + 0.02. Its speed is measured side by side and recorded.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from daemon.voices.vits import VitsVoice
from edge_build.precision_choice import Approximations
from edge_build.quality_gate import (
    ENGLISH,
    GateSet,
    log_spectral_distance_db,
    wideband_pesq,
    word_error_rate,
)

APPROXIMATE_CONTEXT_FRAMES = 8
GATE_WINDOW_FRAMES = 48  # every window this short: more seams than a box makes at speed
MIN_MEAN_PESQ, MIN_WORST_PESQ = 4.2, 4.0
MAX_LOG_SPECTRAL_DISTANCE_DB = 1.0
MAX_WER_INCREASE = 0.02
TIMING_ROUNDS = 3  # each side by side: a build on a slow box pays for every round
# Fewer context frames decode fewer frames, so they are never slower; a few per cent either way
# is this box's timing noise (0.98x and 1.02x in two builds), not a reason to refuse them.
LEAST_SPEEDUP = 0.95


@dataclass
class WindowVerdict:
    context_frames: int
    passed: bool
    reason: str
    pesq_mean: float | None = None
    pesq_worst: float | None = None
    log_spectral_distance_db: float | None = None
    wer_exact: float | None = None
    wer: float | None = None
    speedup: float | None = None  # the exact windows' time over these, streamed as in service

    def as_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def summary(self) -> str:
        figures = (
            f"PESQ {self.pesq_mean:.2f} mean, {self.pesq_worst:.2f} worst; "
            f"distance {self.log_spectral_distance_db:.2f} dB"
        )
        if self.wer is not None:
            figures += f"; word error {self.wer:.2f} (exact {self.wer_exact:.2f})"
        if self.speedup is not None:
            figures += f"; {self.speedup:.2f}x the exact windows' speed"
        verdict = "passed" if self.passed else f"failed ({self.reason})"
        return f"windows with {self.context_frames} context frames {verdict}: {figures}"


def judge_context(
    voice: VitsVoice, context_frames: int = APPROXIMATE_CONTEXT_FRAMES, gate: GateSet = ENGLISH
) -> WindowVerdict:
    """The gate's verdict on `voice`'s windows with `context_frames` of context."""
    rate = voice.info.sample_rate
    pairs = [
        voice.decoded_both_ways(text, context_frames, GATE_WINDOW_FRAMES, gate.options)
        for text in gate.texts
    ]
    scores = [wideband_pesq(exact, windows, rate) for exact, windows in pairs]
    verdict = WindowVerdict(context_frames, True, "a listener cannot tell")
    verdict.pesq_mean, verdict.pesq_worst = float(np.mean(scores)), min(scores)
    verdict.log_spectral_distance_db = max(log_spectral_distance_db(e, w) for e, w in pairs)
    transcribe = gate.transcriber()
    if transcribe is not None:
        texts = list(gate.texts)
        verdict.wer_exact = word_error_rate(texts, [transcribe(e, rate) for e, _ in pairs])
        verdict.wer = word_error_rate(texts, [transcribe(w, rate) for _, w in pairs])
    verdict.speedup = _speedup(voice, context_frames, gate)
    problems = []
    if verdict.pesq_mean < MIN_MEAN_PESQ or verdict.pesq_worst < MIN_WORST_PESQ:
        problems.append(f"PESQ below {MIN_MEAN_PESQ} mean or {MIN_WORST_PESQ} worst")
    if verdict.log_spectral_distance_db > MAX_LOG_SPECTRAL_DISTANCE_DB:
        problems.append(f"distance above {MAX_LOG_SPECTRAL_DISTANCE_DB} dB")
    if verdict.wer is not None and verdict.wer > (verdict.wer_exact or 0.0) + MAX_WER_INCREASE:
        problems.append(f"word error above the exact audio's + {MAX_WER_INCREASE}")
    if verdict.speedup < LEAST_SPEEDUP:
        problems.append("slower than the exact windows here")
    if problems:
        verdict.passed, verdict.reason = False, "; ".join(problems)
    return verdict


def window_approximations(voice: VitsVoice) -> Approximations:
    """For `settle_precision`: the context frames the gate lets this voice's windows use."""
    verdict = judge_context(voice)
    chosen = {"context_frames": verdict.context_frames} if verdict.passed else {}
    return Approximations(chosen, verdict.summary(), verdict.as_dict())


def _speedup(voice: VitsVoice, context_frames: int, gate: GateSet) -> float:
    """The exact windows' time over these, streamed as the service streams (first window
    small, then sized by speed), the two taking turns; the shortest of each."""
    from daemon.voices.vits_windows import EXACT_CONTEXT_FRAMES

    rounds: dict[int, list[float]] = {EXACT_CONTEXT_FRAMES: [], context_frames: []}
    for _ in range(TIMING_ROUNDS):
        for context in rounds:
            started = time.perf_counter()
            for text in gate.texts:
                voice.decoded_both_ways(text, context, None, gate.options, whole=False)
            rounds[context].append(time.perf_counter() - started)
    return min(rounds[EXACT_CONTEXT_FRAMES]) / min(rounds[context_frames])
