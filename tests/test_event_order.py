"""Events of one job arrive in the order they happen, on every interface: `queued` before
`started` before its end, even in a burst where lanes take jobs as fast as they come, and after
a crash, where the broker answers a restarted service only after its lanes have started."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import uuid

import httpx
import pytest

from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.test_faults import LONG_TEXT

JOBS = 300


@pytest.fixture
def burst_box(broker, tmp_path):
    """Two lanes; played jobs fail at once on a speaker that is not there, published ones
    come from the phrase cache after the first: the lanes race the intake."""
    running = Daemon(
        broker,
        tmp_path,
        {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        queue={"max_jobs": JOBS},
        audio={"device": "missing-speaker", "prefill_s": 300},
        cache={"enabled": True},
        runtime={"workers": 2},
    )
    yield running
    running.stop()


def test_a_burst_of_mixed_jobs_keeps_each_jobs_events_in_order(burst_box):
    recorder = burst_box.recorder
    ends = {}
    for number in range(JOBS):
        job_id = f"burst-{number}"
        fields = {"id": job_id, "text": "Mind the gap."}
        if number % 2:
            fields |= {"output": "publish", "reply_topic": f"{burst_box.base}/audio/{job_id}"}
        recorder.publish("say", json.dumps(fields))
        ends[job_id] = "finished" if number % 2 else "failed"
    for job_id, end in ends.items():
        recorder.event(job_id, end)
    heard = {job_id: recorder.events(job_id) for job_id in ends}
    wrong = {
        job_id: events
        for job_id, events in heard.items()
        if events != ["queued", "started", ends[job_id]]
    }
    assert not wrong, f"{len(wrong)} of {JOBS} jobs out of order, e.g. {list(wrong.items())[:3]}"


class SlowBroker:
    """The test broker behind a relay, as a box may meet its broker at a restart: the first
    connection is dropped unanswered; on the next, what the service sends goes through at once,
    but the broker's answers (its CONNACK first) wait for `answer`."""

    def __init__(self, broker_port: int) -> None:
        self._broker_port = broker_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.held = threading.Event()  # the second connection is open and unanswered
        self._answered = threading.Event()
        self._sockets = [self._listener]
        threading.Thread(target=self._relay, name="slow-broker", daemon=True).start()

    def answer(self) -> None:
        self._answered.set()

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _relay(self) -> None:
        with contextlib.suppress(OSError):
            dropped, _ = self._listener.accept()
            dropped.close()
            service, _ = self._listener.accept()
            upstream = socket.create_connection(("127.0.0.1", self._broker_port))
            self._sockets += [service, upstream]
            threading.Thread(target=_pipe, args=(service, upstream), daemon=True).start()
            self.held.set()
            self._answered.wait()
            _pipe(upstream, service)


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)


def test_recovered_jobs_are_queued_before_they_start_while_the_broker_is_slow(
    broker, capture, tmp_path
):
    """A recovered job's `queued` is published before the lanes start, when the broker has not
    accepted the service yet; a `started` published later, once the connection is open but still
    unanswered, must not overtake it. The broker answers here only after the second recovered
    job has started (seen on the HTTP event stream, which does not go through the broker)."""
    journal = tmp_path / "jobs"
    first = Daemon(broker, tmp_path, capture.env(), queue={"journal_dir": str(journal)})
    try:
        first.recorder.publish("pause", "true")
        first.recorder.wait_for(lambda t, p: t == f"{first.base}/pause/state" and p == b"true")
        cut_short = say(first, text=LONG_TEXT)
        then = say(first, text="Next, please.")
        first.recorder.event(then, "queued")
        first.process.kill()  # a crash: both jobs stay in the journal
        first.process.wait(10)
    finally:
        first.stop()
    slow = SlowBroker(broker.port)
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    http_port = free_port()
    second = Daemon(
        broker,
        second_dir,
        capture.env(),
        base=first.base,
        wait_online=False,
        mqtt={"port": slow.port},
        queue={"journal_dir": str(journal)},
        http={"listen": f"127.0.0.1:{http_port}"},
    )
    try:
        second.notifications(until="READY=1")
        assert slow.held.wait(30), "the service did not connect a second time"
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=60) as http,
            http.stream("GET", "/api/events") as stream,
        ):
            lines = stream.iter_lines()
            assert next(lines).startswith(":")
            assert http.post("/api/stop", json={"id": cut_short}).status_code == 200
            for line in lines:
                event = json.loads(line[6:]) if line.startswith("data: ") else {}
                if event.get("id") == then and event["event"] == "started":
                    break
        slow.answer()
        assert second.recorder.event(then, "finished")
        assert second.recorder.events(cut_short) == ["queued", "started", "interrupted"]
        assert second.recorder.events(then) == ["queued", "started", "finished"]
        assert second.recorder.event(then, "queued")["recovered"] is True
    finally:
        second.stop()
        slow.close()
