"""Events of one job arrive in the order they happen, on every interface: `queued` before
`started` before its end, even in a burst where lanes take jobs as fast as they come."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.daemon_helpers import Daemon

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
