"""Whether a VITS voice's streamed decode may use fewer context frames than the exact 12 on
this box. Each window then decodes a few frames less twice; its seams differ from the whole
decode by about 6e-4. The gate (issue 40's): the gate sentences decoded in short windows (as
many seams as a slow box makes) against their whole decode, the exact audio: wideband PESQ mean
at least 4.2 and worst at least 4.0, log-spectral distance at most 1.0 dB, word error (ASR)
no worse than the exact audio's + 0.02; and, since those average over a sentence, no block of
23 ms with speech in it whose difference is less than 25 dB below it (a seam's click: 4 frames
of context passed the averages here, PESQ 4.57 worst and 0.24 dB, with a block at 9.8 dB and a
difference 35 dB below the peak; 8 frames: 31.5 dB, 65 dB below). It must also save work: the
frames the windows decode, context included, are counted against the exact windows' (a count,
not a clock: on a busy box a clock said that fewer frames took longer).

Where the `pesq` package is not installed (it has no wheels; a box has no compiler), the gate
judges by the rest and its record says so (`judged_by`). It is no more lenient for it: the worst
block is the stricter measure (2 frames of context passed PESQ here, 4.21 mean, and failed the
block by far), and every context the tests try gets the same verdict either way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from daemon.voices.vits import BothWays, VitsVoice
from edge_build.precision_choice import Approximations
from edge_build.quality_gate import (
    ENGLISH,
    MAX_LOG_SPECTRAL_DISTANCE_DB,
    MAX_WER_INCREASE,
    MIN_MEAN_PESQ,
    MIN_WORST_PESQ,
    PESQ_MISSING,
    GateSet,
    log_spectral_distance_db,
    word_error_rate,
    worst_block_snr_db,
)

APPROXIMATE_CONTEXT_FRAMES = 8
GATE_WINDOW_FRAMES = 48  # every window this short: more seams than a box makes at speed
MIN_BLOCK_SNR_DB = 25.0


@dataclass
class WindowVerdict:
    context_frames: int
    passed: bool
    reason: str
    pesq_mean: float | None = None
    pesq_worst: float | None = None
    log_spectral_distance_db: float | None = None
    worst_block_snr_db: float | None = None
    wer_exact: float | None = None
    wer: float | None = None
    work_saved: float | None = None  # share of the exact windows' frames these do not decode
    judged_by: list[str] = field(default_factory=list)  # the measures this box could take

    def as_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def summary(self) -> str:
        if self.pesq_mean is not None and self.pesq_worst is not None:
            figures = f"PESQ {self.pesq_mean:.2f} mean, {self.pesq_worst:.2f} worst; "
        else:
            figures = f"{PESQ_MISSING}; "
        figures += (
            f"distance {self.log_spectral_distance_db:.2f} dB; "
            f"worst block {self.worst_block_snr_db:.1f} dB above its difference"
        )
        if self.wer is not None:
            figures += f"; word error {self.wer:.2f} (exact {self.wer_exact:.2f})"
        if self.work_saved is not None:
            figures += f"; {self.work_saved:.0%} fewer frames decoded than exact windows"
        verdict = "passed" if self.passed else f"failed ({self.reason})"
        return f"windows with {self.context_frames} context frames {verdict}: {figures}"


def judge_context(
    voice: VitsVoice, context_frames: int = APPROXIMATE_CONTEXT_FRAMES, gate: GateSet = ENGLISH
) -> WindowVerdict:
    """The gate's verdict on `voice`'s windows with `context_frames` of context."""
    rate = voice.info.sample_rate
    decodes = [
        voice.decoded_both_ways(text, context_frames, GATE_WINDOW_FRAMES, gate.options)
        for text in gate.texts
    ]
    pairs = [(decode.exact, decode.windowed) for decode in decodes]
    verdict = WindowVerdict(context_frames, True, "a listener cannot tell")
    verdict.judged_by = ["log-spectral distance", "worst block"]
    score = gate.pesq()
    if score is not None:
        scores = [score(exact, windows, rate) for exact, windows in pairs]
        verdict.pesq_mean, verdict.pesq_worst = float(np.mean(scores)), min(scores)
        verdict.judged_by.append("PESQ")
    verdict.log_spectral_distance_db = max(log_spectral_distance_db(e, w) for e, w in pairs)
    verdict.worst_block_snr_db = min(worst_block_snr_db(e, w) for e, w in pairs)
    transcribe = gate.transcriber()
    if transcribe is not None:
        verdict.judged_by.append("word error")
        texts = list(gate.texts)
        verdict.wer_exact = word_error_rate(texts, [transcribe(e, rate) for e, _ in pairs])
        verdict.wer = word_error_rate(texts, [transcribe(w, rate) for _, w in pairs])
    verdict.work_saved = _work_saved(voice, decodes, gate)
    problems = []
    pesq_worst = verdict.pesq_worst
    if pesq_worst is not None and (
        verdict.pesq_mean < MIN_MEAN_PESQ or pesq_worst < MIN_WORST_PESQ
    ):
        problems.append(f"PESQ below {MIN_MEAN_PESQ} mean or {MIN_WORST_PESQ} worst")
    if verdict.log_spectral_distance_db > MAX_LOG_SPECTRAL_DISTANCE_DB:
        problems.append(f"distance above {MAX_LOG_SPECTRAL_DISTANCE_DB} dB")
    if verdict.worst_block_snr_db < MIN_BLOCK_SNR_DB:
        problems.append(f"a block of speech less than {MIN_BLOCK_SNR_DB:g} dB above its difference")
    if verdict.wer is not None and verdict.wer > (verdict.wer_exact or 0.0) + MAX_WER_INCREASE:
        problems.append(f"word error above the exact audio's + {MAX_WER_INCREASE}")
    if verdict.work_saved <= 0:
        problems.append("no fewer frames decoded than with exact windows")
    if problems:
        verdict.passed, verdict.reason = False, "; ".join(problems)
    return verdict


def window_approximations(voice: VitsVoice) -> Approximations:
    """For `settle_precision`: the context frames the gate lets this voice's windows use."""
    verdict = judge_context(voice)
    chosen = {"context_frames": verdict.context_frames} if verdict.passed else {}
    return Approximations(chosen, verdict.summary(), verdict.as_dict())


def _work_saved(voice: VitsVoice, decodes: list[BothWays], gate: GateSet) -> float:
    """The share of the exact windows' frames (context included) that these windows do not
    decode, over the gate sentences in the gate's windows."""
    from daemon.voices.vits_windows import EXACT_CONTEXT_FRAMES

    exact = sum(
        voice.decoded_both_ways(
            text, EXACT_CONTEXT_FRAMES, GATE_WINDOW_FRAMES, gate.options
        ).frames_decoded
        for text in gate.texts
    )
    return 1 - sum(decode.frames_decoded for decode in decodes) / exact
