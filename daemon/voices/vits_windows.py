"""A VITS sentence decoded window by window, so that its audio can play before all of it is
made: the windows sized from the decode speed just measured, each with context on both sides
(the joined windows equal one whole decode), and Piper's peak normalisation for a sentence
that arrives in pieces."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from daemon.audio.playback_lead import PlaybackLead
from daemon.errors import GpuOutOfMemory
from daemon.runtime import scheduling
from daemon.runtime.base import Stage

# Streaming decode (86 latent frames = 1 s of audio): a sentence is decoded as a small first
# window (its audio can play at once), then windows sized from the decode speed just measured,
# so that each ends within BUDGET_SHARE of the audio still ahead of playback: few windows (little
# context overhead) on a fast box, small ones on a slow or busy one, never a gap mid-sentence; a
# rest of at most half a window joins the window before it. The speed is measured on the window
# before, with its context: the first window's is the lowest per frame, so the estimate errs on the
# safe side, and a quarter of the time ahead is left as margin (with half, a medium sentence took
# three windows where two do, each with its context decoded twice). A box behind (even the
# smallest window would end after the audio ahead, as with many requests at once: measured, 11
# windows of mostly 32 frames per 6-second sentence under eight) makes each window twice the
# last instead, up to CATCH_UP_FRAMES: playback stops either way, and fewer seams are less work
# (a seam's context is 12 % of a 128-frame window, 50 % of a 32-frame one); larger ones hold
# more memory at once (after four mixed requests at once, growing up to 512 frames left the
# service at 389 and 441 MB in two runs, up to 256 at 398 and 427, up to 128 at 389 and 405;
# 390-399 before; wyoming-piper 420-424).
# Without a measured loudness gain a sentence of up to STREAM_MIN_FRAMES is decoded whole: Piper's
# per-sentence peak normalisation needs its end before its start can play.
# Each window has context frames on both sides: the decoder's receptive field reaches 12 frames
# (with 12 the joined windows equal one whole decode exactly; with 8 they differ by 6e-4, which
# the quality gate may accept: `fastvoice build`, edge_build/window_gate.py), and every context
# frame is decoded twice, so no more. MAX_WINDOW_FRAMES bounds the
# decoder's activation memory: about 0.45 MB per frame on the CPU (ONNX Runtime's arena holds
# it until the box is idle), 230 MB for 512 frames; a longer window saves only its context (under
# 5 %).
log = logging.getLogger(__name__)
STREAM_MIN_FRAMES = 256
FIRST_WINDOW_FRAMES = 32
MAX_WINDOW_FRAMES = 512
EXACT_CONTEXT_FRAMES = 12
SMALLEST_WINDOW_FRAMES = 16  # out of GPU memory below this: the request fails
BUDGET_SHARE = 0.75
CATCH_UP_FRAMES = 128
GAIN_RAMP_S = 0.005


@dataclass
class DecodeSpeed:
    """The decode speed last measured (frames a second, context included), kept by a voice from
    one sentence to the next: a later sentence's first window is sized by it."""

    frames_per_s: float | None = None


class WindowedDecoder:
    """A voice's decoder stage, run over windows of a sentence's latent frames."""

    def __init__(
        self,
        decoder: Stage,
        rate: int,
        name: str,
        context_frames: int = EXACT_CONTEXT_FRAMES,
        window_frames: int | None = None,
        speed: DecodeSpeed | None = None,
    ) -> None:
        """`window_frames`: every window after the first this long, whatever the speed (the
        quality gate compares decodes window by window at the same places)."""
        self.decoder = decoder
        self.rate = rate
        self.name = name
        self.context = context_frames
        self.window_frames = window_frames
        self.speed = speed or DecodeSpeed()
        self.frames_decoded = 0  # context included: the work the windows cost

    def decode(
        self,
        latent: Mapping[str, np.ndarray],
        stream_short: bool,
        later_frames: int = 0,
        opening: bool = False,
        streamed: bool = True,
        ahead_s: float | None = None,
    ) -> Iterator[tuple[np.ndarray, bool]]:
        """The decoder over windows of the encoder's latent frames with context; a short
        sentence in one window unless `stream_short`. Yields audio and whether it ends the
        sentence. `later_frames` (the request's after this sentence) and `opening` (a listener
        waits for this sentence's first audio) place each window among overlapping requests'.
        Not `streamed` (audio wanted whole): windows as large as allowed, the first too.
        `ahead_s`: the request's audio already made and not yet heard; the first window then
        need only end before it does."""
        frames = max(value.shape[-1] for value in latent.values())
        start, lead = 0, PlaybackLead(ahead_s)
        largest, limit = self._largest()
        short = frames <= STREAM_MIN_FRAMES and not stream_short
        if short and (limit is None or frames <= limit):
            size = frames
        else:
            size = self._first_size(streamed, ahead_s, largest)
        while start < frames:
            end = min(frames, start + size)
            fits = frames - start <= largest  # the rest fits one window
            if frames - end < max(FIRST_WINDOW_FRAMES, size // 2) and fits:
                end = frames  # no small last window: each costs its context twice
            left, right = max(0, start - self.context), min(frames, end + self.context)
            window = _frames(latent, frames, left, right)
            scheduling.before_run(frames - start + later_frames, opening and start == 0)
            began = time.perf_counter()
            try:
                audio = self.decoder.run(window)[0].reshape(-1).astype(np.float32)
            except GpuOutOfMemory as error:
                # A batch-1 voice's analogue of a smaller batch: smaller windows, same audio
                # (each keeps its context frames), for the rest of the sentence.
                if end - start <= SMALLEST_WINDOW_FRAMES:
                    raise
                size = largest = max(SMALLEST_WINDOW_FRAMES, (end - start) // 2)
                log.warning("%s: %s; decoding windows of %d frames", self.name, error, size)
                continue
            self.speed.frames_per_s = (right - left) / max(time.perf_counter() - began, 1e-6)
            self.frames_decoded += right - left
            hop = len(audio) // (right - left)
            piece = audio[(start - left) * hop : (end - left) * hop]
            lead.made(len(piece) / self.rate)
            yield piece, end == frames
            last, start = end - start, end
            if self.window_frames is not None:
                size = self.window_frames
            elif not streamed:
                size = largest
            else:
                size = self._next_size(lead.ahead_s() or 0.0, last, largest)

    def _first_size(self, streamed: bool, ahead_s: float | None, largest: int) -> int:
        """Audio wanted whole: the largest window. A listener waiting for it (nothing of the
        request ahead of playback, or no speed measured yet): the small first window. Else as
        large as ends before the audio ahead does."""
        if not streamed:
            return largest
        if ahead_s is None or self.speed.frames_per_s is None:
            return min(FIRST_WINDOW_FRAMES, largest)
        return self._budget(ahead_s, largest)

    def _next_size(self, ahead_s: float, last: int, largest: int) -> int:
        """The window within the audio ahead of playback; when even the smallest would not
        end in time (a box behind, as under many requests at once), playback stops whatever
        the size: then twice the last window, so that the work (each seam's context decoded
        twice) shrinks and the audio catches up, instead of a stop at every small window."""
        if self._fits(ahead_s):
            return self._budget(ahead_s, largest)
        return min(max(2 * last, FIRST_WINDOW_FRAMES), CATCH_UP_FRAMES, largest)

    def _fits(self, ahead_s: float) -> bool:
        """Whether the smallest window would end, at the speed last measured, within the
        audio ahead of playback."""
        assert self.speed.frames_per_s is not None
        smallest = FIRST_WINDOW_FRAMES + 2 * self.context
        return smallest / self.speed.frames_per_s <= ahead_s

    def _budget(self, ahead_s: float, largest: int) -> int:
        """The window that ends, at the speed last measured, within BUDGET_SHARE of the audio
        ahead of playback."""
        assert self.speed.frames_per_s is not None
        budget = int(BUDGET_SHARE * ahead_s * self.speed.frames_per_s) - 2 * self.context
        return min(max(budget, FIRST_WINDOW_FRAMES), largest)

    def _largest(self) -> tuple[int, int | None]:
        """The largest window (its context aside) and the engine's frame limit, if any: an
        engine built for at most `limit` frames takes windows of that much, context included."""
        limit = self.decoder.limits.get("frames")
        if limit is None:
            return MAX_WINDOW_FRAMES, None
        return max(1, min(MAX_WINDOW_FRAMES, limit - 2 * self.context)), limit


def _frames(
    latent: Mapping[str, np.ndarray], frames: int, left: int, right: int
) -> dict[str, np.ndarray]:
    """Frames left to right of each latent input that has frames (the rest whole)."""
    return {
        name: value[..., left:right] if value.shape[-1] == frames else value
        for name, value in latent.items()
    }


class StreamingGain:
    """Piper's per-sentence peak normalisation, for a sentence that arrives in pieces.

    The gain is set by the first piece (1 / its peak) and may only fall: a louder later piece
    lowers it, ramped over a few milliseconds. A sentence decoded in one piece gets exactly
    Piper's normalisation.
    """

    def __init__(self, sample_rate: int) -> None:
        self.ramp = int(sample_rate * GAIN_RAMP_S)
        self.gain: float | None = None

    def apply(self, audio: np.ndarray) -> np.ndarray:
        peak = float(np.max(np.abs(audio))) if audio.size else 0.0
        target = 1.0 / peak if peak > 1e-8 else None
        if self.gain is None:
            self.gain = target or 1.0
            return audio * np.float32(self.gain)
        new = min(self.gain, target) if target is not None else self.gain
        gains = np.full(len(audio), new, dtype=np.float32)
        length = min(self.ramp, len(audio))
        gains[:length] = np.linspace(self.gain, new, length, dtype=np.float32)
        self.gain = new
        return audio * gains
