"""A queued job whose `expires_s` runs out leaves the queue then, not when a lane would have
taken it: paused or not, with its `rejected`/`expired` event at that moment; a stop that finds
it still queued reports it expired, not interrupted. The service's parts run here on a clock the
test moves; the last test checks a running service on its own clock."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from daemon.service.commands import SayCommand
from daemon.service.event_sink import EventSink
from daemon.service.expiry import ExpiryWatch
from daemon.service.front_door import FrontDoor
from daemon.service.jobs import JobQueue
from daemon.service.outbox import Outbox
from tests.daemon_helpers import Daemon, front_door_of, say
from tests.mqtt_helpers import free_port


class ManualClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Parts:
    """The service's queue, intake, events and front door (no lane), on a manual clock."""

    clock: ManualClock
    queue: JobQueue
    events: EventSink
    door: FrontDoor
    sent: list[dict[str, Any]]  # the events as the broker gets them

    def submit(self, job_id: str, expires_s: float | None = None) -> str:
        refused = self.door.submit(
            SayCommand(id=job_id, text="Boarding soon.", expires_s=expires_s)
        )
        assert refused is None, refused
        return job_id

    def events_of(self, job_id: str) -> list[tuple[str, str | None]]:
        return [(sent["event"], sent.get("reason")) for sent in self.sent if sent["id"] == job_id]

    def queued_ids(self) -> list[str]:
        return [job["id"] for job in self.door.jobs()]


@pytest.fixture
def parts(synthesizer) -> Parts:
    settings = synthesizer.settings
    clock = ManualClock()
    queue = JobQueue(settings.config.queue.max_jobs, clock)
    outbox = Outbox(settings.config.mqtt.base_topic)
    sent: list[dict[str, Any]] = []
    outbox.attach(lambda _topic, payload, _retain: sent.append(json.loads(payload)))
    events = EventSink(outbox)
    door = front_door_of(synthesizer, settings, queue, events)
    door.set_paused(True)
    return Parts(clock, queue, events, door, sent)


def test_a_paused_queue_lets_a_job_go_when_its_expiry_comes_not_before(parts):
    job = parts.submit("brief", expires_s=2)
    parts.clock.advance(1.9)
    assert parts.queue.take_expired(wait_s=0) == [] and parts.queued_ids() == [job]
    parts.clock.advance(0.1)
    assert [expired.id for expired in parts.queue.take_expired(wait_s=0)] == [job]
    assert parts.queued_ids() == []


def test_an_expired_job_is_never_handed_to_a_lane(parts):
    parts.door.set_paused(False)
    parts.submit("brief", expires_s=2)
    lasting = parts.submit("lasting")
    parts.clock.advance(2)
    assert parts.queue.get(timeout=0).id == lasting
    assert parts.queue.get(timeout=0) is None  # left to the expiry watch


def test_the_expiry_watch_drops_a_job_at_its_expiry_with_its_event(parts):
    dropped = threading.Event()
    parts.door.listen(lambda event: dropped.set() if event["event"] == "rejected" else None)
    watch = ExpiryWatch(parts.queue, parts.events)
    watch.start()
    try:
        job = parts.submit("brief", expires_s=2)
        parts.clock.advance(2)
        assert dropped.wait(10), "no event when the job expired in the paused queue"
        assert parts.events_of(job) == [("queued", None), ("rejected", "expired")]
        assert parts.queued_ids() == []
    finally:
        watch.shutdown()


def test_a_job_queued_again_to_resume_no_longer_expires(parts):
    """Cut off by a critical announcement, a job that started waits to resume: its expiry was
    about starting, and it did."""
    job_id = parts.submit("cut-off", expires_s=2)
    job = parts.queue.get(timeout=0)  # not while paused
    assert job is None
    parts.door.set_paused(False)
    job = parts.queue.get(timeout=0)
    assert job is not None and job.id == job_id
    job.started = parts.clock()
    parts.queue.push(job)  # as the lane does with `will_resume`
    parts.clock.advance(10)
    assert parts.queue.take_expired(wait_s=0) == [] and parts.queued_ids() == [job_id]


@pytest.mark.parametrize("stop", ["all", "each by id"])
def test_a_stop_reports_a_job_whose_expiry_had_come_as_expired(parts, stop):
    """No watch runs here: the job's expiry came, but nothing took it out yet."""
    expired = parts.submit("brief", expires_s=2)
    waiting = parts.submit("lasting")
    parts.clock.advance(2)
    if stop == "all":
        parts.door.stop(everything=True)
    else:
        assert parts.door.stop_job(expired) and parts.door.stop_job(waiting)
    assert parts.events_of(expired) == [("queued", None), ("rejected", "expired")]
    assert parts.events_of(waiting) == [("queued", None), ("interrupted", "stopped")]


def test_a_paused_service_drops_an_expired_job_then_and_stop_all_leaves_it_expired(
    broker, capture, tmp_path
):
    port = free_port()
    daemon = Daemon(broker, tmp_path, capture.env(), http={"listen": f"127.0.0.1:{port}"})
    try:
        recorder = daemon.recorder
        recorder.publish("pause", "true")
        recorder.wait_for(lambda t, p: t == f"{daemon.base}/pause/state" and p == b"true")
        expiring = say(daemon, text="Only for a moment.", expires_s=1)
        waiting = say(daemon, text="Whenever you are ready.")
        queued = recorder.event(expiring, "queued")
        dropped = recorder.event(expiring, "rejected", timeout=20)  # the queue is still paused
        assert dropped["reason"] == "expired" and dropped["time"] - queued["time"] > 0.5
        jobs = httpx.get(f"http://127.0.0.1:{port}/api/jobs", timeout=30).json()
        assert [job["id"] for job in jobs["jobs"]] == [waiting] and jobs["paused"] is True
        recorder.publish("stop", json.dumps({"all": True}))
        recorder.event(waiting, "interrupted")
        assert recorder.events(expiring) == ["queued", "rejected"]
    finally:
        daemon.stop()
