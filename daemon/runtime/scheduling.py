"""Which waiting run goes next when requests overlap: first audio first, then the request with
the least work left (shortest-remaining-first), and none waiting past a bound.

A voice says, on the thread that makes the run and just before it, how much of the request is
left (in a VITS voice's latent frames: 86 a second of audio; text not yet reached is estimated
from its characters) and whether the run is on the way to the request's first audio. The hint
holds for that one run; a run without one counts as on the way to first audio. At equal
compute, serving the shortest first lowers the median completion of mixed requests; first
audio first keeps every newcomer's wait short.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

MAX_WAIT_S = 1.5  # a run waiting this long goes before every run that has waited less
FRAMES_PER_CHARACTER = 6  # a voice speaks about 14 characters a second, 86 frames

_hint = threading.local()


def before_run(remaining_frames: int, first_audio: bool) -> None:
    """What this thread's next run is part of: the frames left in its request, and whether it
    comes before the request's first audio."""
    _hint.next_run = (remaining_frames, first_audio)


def _taken_hint() -> tuple[int, bool]:
    hint = getattr(_hint, "next_run", None)
    _hint.next_run = None
    return hint or (0, True)


@dataclass
class WaitingRun:
    ticket: int
    remaining: int = 0
    first_audio: bool = True
    since: float = field(default_factory=time.monotonic)

    @classmethod
    def hinted(cls, ticket: int) -> WaitingRun:
        """This thread's run, with the hint its voice gave (taken: it holds for one run)."""
        remaining, first_audio = _taken_hint()
        return cls(ticket, remaining, first_audio)

    def rank(self, now: float) -> tuple:
        """Lower goes first: the long-waiting by arrival, then first audio, then least left."""
        if now - self.since >= MAX_WAIT_S:
            return (0, self.ticket)
        return (1, not self.first_audio, self.remaining, self.ticket)


def next_in_line(line: list[WaitingRun]) -> WaitingRun:
    now = time.monotonic()
    return min(line, key=lambda run: run.rank(now))
