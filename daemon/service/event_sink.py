"""Job events: one JSON message per state change of a job, to the broker and to every listener
(Hermes, the local socket), with the counts and first-audio latencies that `stats` reports."""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from daemon.events import ENDS
from daemon.service.jobs import Job
from daemon.service.journal import JobJournal
from daemon.service.outbox import Outbox

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]
# Sees the job beside its event (its priority, its timings): the metrics.
JobObserver = Callable[[dict[str, Any], Job | None], None]


class EventSink:
    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.listeners: list[Listener] = []
        self.observers: list[JobObserver] = []
        self.counts = {"accepted": 0, "finished": 0, "failed": 0, "rejected": 0, "interrupted": 0}
        self.latencies: deque[float] = deque(maxlen=500)

    def emit(self, event: str, job: Job | None, **fields: Any) -> None:
        """Always with the job's id; the end of a job also closes its journal entry."""
        message: dict[str, Any] = {"v": 1, "event": event, "id": job.id if job else None}
        message.update({k: v for k, v in fields.items() if v is not None or k == "id"})
        message["time"] = round(time.time(), 3)
        if event in self.counts:
            self.counts[event] += 1
        ended = event in ENDS and not fields.get("will_resume")
        if ended and job is not None and job.journal is not None:  # gone, or never queued
            JobJournal.done(job.journal)
            job.journal = None
        if event in ("finished", "interrupted") and job is not None and job.first_audio:
            self.latencies.append(job.first_audio - job.received)
        log.info("job %s %s %s", message["id"], event, fields.get("message", ""))
        calls = [lambda listener=listener: listener(message) for listener in self.listeners]
        calls += [lambda observer=observer: observer(message, job) for observer in self.observers]
        for call in calls:
            try:
                call()
            except Exception:
                log.exception("event listener failed on %s", message)
        # Last: whoever sees the event can rely on what the listeners did (the render queue's
        # done marker is on the broker before `finished` is).
        self.outbox.publish_json("events", message)

    def expired(self, job: Job) -> None:
        """The job's `expires_s` ran out before it could start: it is dropped."""
        self.emit("rejected", job, reason="expired", message="expired before it could start")

    def accepted(self) -> None:
        self.counts["accepted"] += 1

    def job_stats(self) -> dict[str, Any]:
        latencies = sorted(self.latencies)
        percentile = (
            statistics.quantiles(latencies, n=10, method="inclusive")
            if len(latencies) > 1
            else None
        )
        return {
            "jobs": dict(self.counts),
            "latency_p50_s": round(statistics.median(latencies), 4) if latencies else None,
            "latency_p90_s": round(percentile[8], 4) if percentile else None,
        }
