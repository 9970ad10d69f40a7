"""Queued jobs leave when their `expires_s` runs out, not when a lane would have taken them:
in a paused queue, or behind a long announcement, an expired job is dropped at its deadline,
with its `rejected`/`expired` event then, and no list of jobs shows it after."""

from __future__ import annotations

import logging
import threading

from daemon.service.event_sink import EventSink
from daemon.service.jobs import JobQueue

log = logging.getLogger(__name__)

# How long one wait for an expiry lasts before the thread looks whether it is asked to stop.
WAIT_S = 0.5


class ExpiryWatch(threading.Thread):
    def __init__(self, queue: JobQueue, events: EventSink) -> None:
        super().__init__(name="expiry-watch", daemon=True)
        self.queue = queue
        self.events = events
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.is_set():
            for job in self.queue.take_expired(WAIT_S):
                try:
                    self.events.expired(job)
                except Exception:  # one event that cannot be sent never stops the expiries
                    log.exception("job %s expired; its event could not be sent", job.id)

    def shutdown(self) -> None:
        self._stopping.set()
        self.join(timeout=10)
