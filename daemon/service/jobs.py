"""Jobs and the queue: bounded, ordered by priority then arrival, each id accepted once; a job
whose `expires_s` runs out before it starts leaves the queue then, paused or not."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.service.commands import PRIORITY_RANK, SayCommand
from daemon.service.text_feed import TextFeed
from daemon.text.script import Script

SEEN_IDS = 4096

# Seconds on a clock that never jumps (time.monotonic); a test may give the queue its own.
Clock = Callable[[], float]


@dataclass
class Job:
    command: SayCommand
    received: float = field(default_factory=time.monotonic)
    started: float | None = None
    first_audio: float | None = None
    synthesis_s: float = 0.0
    audio_s: float = 0.0
    cache_hit: bool = False
    journal: Path | None = None  # its entry in the job journal until it ends
    # Its text as prepared when it was accepted (None for a job recovered from the journal):
    # the lane speaks this, not the text prepared a second time.
    script: Script | None = None
    # More of its text, still arriving (a streamed answer); None when the text is whole.
    more_text: TextFeed | None = None

    @property
    def id(self) -> str:
        return self.command.id

    @property
    def expires_at(self) -> float | None:
        """When it is dropped if it has not started (on the queue's clock); None: never (a job
        that started, queued again to resume after a critical one, no longer expires)."""
        expires = self.command.expires_s
        return None if expires is None or self.started is not None else self.received + expires

    def timings(self) -> dict[str, Any]:
        """Seconds, rounded: queue wait, time to first audio, synthesis, audio, real-time factor."""
        result: dict[str, Any] = {}
        if self.started is not None:
            result["queue_wait_s"] = round(self.started - self.received, 4)
        if self.first_audio is not None and self.started is not None:
            result["first_audio_s"] = round(self.first_audio - self.started, 4)
        if self.audio_s:
            result["synthesis_s"] = round(self.synthesis_s, 4)
            result["audio_s"] = round(self.audio_s, 4)
            result["rtf"] = round(self.synthesis_s / self.audio_s, 4)
            result["cache_hit"] = self.cache_hit
        return result


class QueueFull(Exception):
    pass


class DuplicateJob(Exception):
    pass


class JobQueue:
    def __init__(self, max_jobs: int, clock: Clock = time.monotonic) -> None:
        """`clock`: what a job's `received` and its expiry are read on."""
        self.max_jobs = max_jobs
        self.clock = clock
        self._heap: list[tuple[int, int, Job]] = []
        self._arrival = itertools.count()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._cond = threading.Condition()
        self._paused = False

    def admit(self, job: Job) -> None:
        """Takes the job's id as accepted. Raises DuplicateJob for an id already accepted,
        QueueFull past the bound. The job is not queued yet: `push` queues it."""
        with self._cond:
            if job.id in self._seen:
                raise DuplicateJob(job.id)
            if len(self._heap) >= self.max_jobs:
                raise QueueFull(job.id)
            self._seen[job.id] = None
            if len(self._seen) > SEEN_IDS:
                self._seen.popitem(last=False)

    def push(self, job: Job) -> None:
        """Queues an admitted job (or one a lane gives back to resume later)."""
        with self._cond:
            rank = PRIORITY_RANK[job.command.priority]
            heapq.heappush(self._heap, (rank, next(self._arrival), job))
            self._cond.notify_all()

    def put(self, job: Job) -> None:
        """`admit`, then `push`."""
        self.admit(job)
        self.push(job)

    def get(self, timeout: float, accepts: Callable[[Job], bool] | None = None) -> Job | None:
        """The next job `accepts` takes (best priority, then oldest), or None after `timeout`
        or while paused. An expired job is never handed out: `take_expired` takes it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                index = None if self._paused else self._best(accepts)
                if index is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            entry = self._heap[index]
            self._heap[index] = self._heap[-1]
            self._heap.pop()
            heapq.heapify(self._heap)
            return entry[2]

    def _best(self, accepts: Callable[[Job], bool] | None) -> int | None:
        now = self.clock()

        def takes(job: Job) -> bool:
            return not _expired(job, now) and (accepts is None or accepts(job))

        if self._heap and takes(self._heap[0][2]):
            return 0
        ranked = sorted(range(len(self._heap)), key=lambda i: self._heap[i][:2])
        return next((i for i in ranked if takes(self._heap[i][2])), None)

    def take_expired(self, wait_s: float) -> list[Job]:
        """Takes out the queued jobs whose expiry has come, in queue order, paused or not;
        waits up to `wait_s` (real seconds) for the first one. [] when none came."""
        waited_until = time.monotonic() + wait_s
        with self._cond:
            while True:
                now = self.clock()
                expired = sorted(entry for entry in self._heap if _expired(entry[2], now))
                if expired:
                    self._heap = [entry for entry in self._heap if not _expired(entry[2], now)]
                    heapq.heapify(self._heap)
                    return [entry[2] for entry in expired]
                remaining = waited_until - time.monotonic()
                if remaining <= 0:
                    return []
                # Until the first expiry; a push wakes it sooner (its job may expire first).
                first = self._first_expiry()
                self._cond.wait(remaining if first is None else min(remaining, first - now))

    def _first_expiry(self) -> float | None:
        expiries = [job.expires_at for _, _, job in self._heap if job.expires_at is not None]
        return min(expiries, default=None)

    def expired(self, job: Job) -> bool:
        """Whether the job's expiry has come (it is queued, or was until just now)."""
        return _expired(job, self.clock())

    def remove(self, job_id: str) -> Job | None:
        """Takes a queued job out (stopped before it started); None if it is not queued."""
        with self._cond:
            for index, (_, _, job) in enumerate(self._heap):
                if job.id == job_id:
                    self._heap[index] = self._heap[-1]
                    self._heap.pop()
                    heapq.heapify(self._heap)
                    return job
            return None

    def snapshot(self) -> list[Job]:
        """The queued jobs in the order they will be taken."""
        with self._cond:
            return [entry[2] for entry in sorted(self._heap)]

    def clear(self) -> list[Job]:
        with self._cond:
            jobs = [entry[2] for entry in sorted(self._heap)]
            self._heap.clear()
            return jobs

    def set_paused(self, paused: bool) -> None:
        with self._cond:
            self._paused = paused
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        return self._paused

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)


def _expired(job: Job, now: float) -> bool:
    expires_at = job.expires_at
    return expires_at is not None and now >= expires_at
