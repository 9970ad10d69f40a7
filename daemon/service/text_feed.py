"""The text of a job that goes on arriving after it was accepted (an assistant's answer,
streamed): the adapter puts each piece ready to be spoken, the lane takes them in order while
the job plays, so the answer is one job, on one stream (music stays ducked across its gaps)."""

from __future__ import annotations

import threading
from collections import deque


class TextFeed:
    def __init__(self) -> None:
        self._pieces: deque[str] = deque()
        self._ended = False  # the sender has no more
        self._abandoned = False  # the job ended (stopped, failed): more text is not wanted
        self._cond = threading.Condition()

    def put(self, text: str) -> bool:
        """False once the job has ended: the sender may stop sending."""
        with self._cond:
            if self._abandoned:
                return False
            self._pieces.append(text)
            self._cond.notify_all()
            return True

    def end(self) -> None:
        """The sender's text is complete."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def abandon(self) -> None:
        """The job has ended: what was sent and what comes is dropped."""
        with self._cond:
            self._abandoned = True
            self._pieces.clear()
            self._cond.notify_all()

    def take(self, wait_s: float) -> str | None:
        """The next piece; "" when none came within `wait_s`; None once the text has ended."""
        with self._cond:
            self._cond.wait_for(lambda: self._pieces or self._ended, wait_s)
            if self._pieces:
                return self._pieces.popleft()
            return None if self._ended else ""
