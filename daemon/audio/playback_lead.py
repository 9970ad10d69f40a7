"""How far a request's audio is ahead of its playback, had playback begun with the first piece:
what the synthesizer tells a voice before each sentence, and what sizes a voice's next window."""

from __future__ import annotations

import time


class PlaybackLead:
    """Seconds of audio made, against the clock since the first of it (or since now, when
    `ahead_s` of the request were already ahead before this part of it began)."""

    def __init__(self, ahead_s: float | None = None) -> None:
        self.made_s = ahead_s or 0.0
        self.since: float | None = None if ahead_s is None else time.perf_counter()

    def made(self, seconds: float) -> None:
        if self.since is None:
            self.since = time.perf_counter()
        self.made_s += seconds

    def ahead_s(self) -> float | None:
        """None until any audio was made."""
        if self.since is None:
            return None
        return max(0.0, self.made_s - (time.perf_counter() - self.since))
