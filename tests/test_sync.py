"""Synchronised start: a job with `at` is taken ahead and plays at its instant, `sync` waits
for the configured lead, and a job that cannot make its instant reports `late` and plays or is
dropped by the policy. How closely several boxes start together is measured by
tools/sync_check.py (a figure, not a test)."""

from __future__ import annotations

import time
import uuid

import pytest

from daemon.config import QueueConfig
from tests.daemon_helpers import Daemon, say


def test_a_job_waits_for_its_instant(broker, capture, tmp_path):
    daemon = Daemon(
        broker, tmp_path, capture.env(), mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"}
    )
    try:
        at = round((time.time() + 3) * 1000)
        job = say(daemon, text="On the count of three.", at=at)
        started = daemon.recorder.event(job, "started")
        finished = daemon.recorder.event(job, "finished")
        assert started["time"] < at / 1000 <= finished["time"]  # taken early, played at `at`
        assert "late" not in daemon.recorder.events(job)
    finally:
        daemon.stop()


@pytest.mark.parametrize(("policy", "end"), [("play", "finished"), ("drop", "interrupted")])
def test_a_job_past_its_instant_reports_late_and_follows_the_policy(
    broker, capture, tmp_path, policy, end
):
    daemon = Daemon(
        broker,
        tmp_path,
        capture.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        queue={"sync_late_policy": policy},
    )
    try:
        job = say(daemon, text="Too late for this.", at=round((time.time() - 2) * 1000))
        late = daemon.recorder.event(job, "late")
        assert late["late_ms"] >= 2000 and late["policy"] == policy
        ended = daemon.recorder.event(job, end)
        if end == "interrupted":
            assert ended["reason"] == "late"
        sync = say(daemon, text="In a moment.", sync=True)
        queued = daemon.recorder.event(sync, "queued")
        finished = daemon.recorder.event(sync, "finished")
        lead = QueueConfig().sync_lead_s
        assert finished["time"] >= queued["time"] + lead - 0.05  # queue.sync_lead_s after arrival
        assert "late" not in daemon.recorder.events(sync)
    finally:
        daemon.stop()


def test_the_clock_state_is_the_kernels():
    """Read through adjtimex: the struct's layout is right when the kernel's time in it is
    now; the state says unsynchronised exactly when the kernel does."""
    from daemon.box.clock import STA_UNSYNC, TIME_ERROR, clock_state, read_timex

    state, timex = read_timex()
    assert abs(timex.time.tv_sec - time.time()) < 5
    shown = clock_state()
    unsynchronised = state == TIME_ERROR or bool(timex.status & STA_UNSYNC)
    assert shown["synchronised"] is not unsynchronised
    assert shown["max_error_ms"] == timex.maxerror / 1000 >= shown["estimated_error_ms"] >= 0
