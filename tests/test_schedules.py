"""Schedules: which runs fall due (cron and once, with given clocks), and a running service
making an `at` announcement a few seconds ahead (added by a reload) and reporting the runs it
missed while it was down."""

from __future__ import annotations

import json
import signal
import uuid
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from daemon.admin.config_checks import on_box
from daemon.config import parse_config
from daemon.errors import ConfigError
from daemon.service.scheduler import next_runs, runs_between
from tests.daemon_helpers import Daemon

BERLIN = ZoneInfo("Europe/Berlin")


def entries(*documents: dict):
    return parse_config({"schedules": list(documents)}).schedules


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """December 2026 in Berlin: the 4th is a Friday."""
    return datetime(2026, 12, day, hour, minute, tzinfo=BERLIN)


def test_a_cron_schedule_falls_due_at_each_of_its_times_in_its_time_zone():
    closing = entries({"name": "closing", "cron": "45 20 * * mon-sat", "text": "We close soon."})
    runs = runs_between(closing, at(4, 20), at(7, 21))
    assert [run.due for run in runs] == [at(4, 20, 45), at(5, 20, 45), at(7, 20, 45)]  # no Sun
    assert runs[0].job_id == f"closing-{int(at(4, 20, 45).timestamp())}"
    assert runs_between(closing, at(4, 20, 45), at(4, 23)) == []  # a run is due once
    assert next_runs(closing, at(5, 21)) == {"closing": at(7, 20, 45)}


def test_a_one_shot_falls_due_once_and_then_has_no_next_run():
    once = entries({"at": "2026-12-24T17:00", "text": "Merry Christmas."})
    evening = datetime(2026, 12, 24, 17, tzinfo=BERLIN)
    assert [run.due for run in runs_between(once, at(4, 0), at(31, 0))] == [evening]
    assert [r.name for r in runs_between(once, at(4, 0), at(31, 0))] == ["schedule-0"]
    assert next_runs(once, at(4, 0)) == {"schedule-0": evening}
    assert next_runs(once, at(31, 0)) == {"schedule-0": None}


def test_runs_are_in_order_across_schedules():
    both = entries(
        {"name": "late", "cron": "30 9 * * *", "text": "b"},
        {"name": "early", "cron": "0 9 * * *", "text": "a"},
    )
    assert [run.name for run in runs_between(both, at(4, 8), at(4, 10))] == ["early", "late"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"text": "x"}, "give either cron"),
        ({"cron": "0 9 * * *", "at": "2026-12-24T17:00", "text": "x"}, "give either cron"),
        ({"cron": "0 25 * * *", "text": "x"}, "not a five-field cron expression"),
        ({"cron": "@daily", "text": "x"}, "not a five-field cron expression"),
        ({"cron": "0 9 * * *", "text": "x", "voice": "nobody"}, "schedules.0.voice: 'nobody'"),
        ({"cron": "0 9 * * *", "text": ""}, "schedules.0.text"),
        ({"cron": "0 9 * * *", "text": "x", "chime": "gong"}, "schedules.0.chime: unknown sound"),
    ],
)
def test_a_broken_schedule_is_named_by_its_key(entry, message):
    """By the models, or by the checks of what it names on the box (a voice, a chime)."""
    with pytest.raises(ConfigError, match=message):
        on_box(parse_config({"schedules": [entry]}))


@pytest.fixture
def mqtt_settings():
    return {"client_id": f"fv-{uuid.uuid4().hex[:6]}"}


def test_an_at_announcement_added_by_a_reload_plays_on_its_second(
    broker, capture, tmp_path, mqtt_settings
):
    daemon = Daemon(broker, tmp_path, capture.env(), mqtt=mqtt_settings, time_zone="UTC")
    try:
        due = (datetime.now(timezone.utc) + timedelta(seconds=5)).replace(microsecond=0)
        at = due.strftime("%Y-%m-%dT%H:%M:%S")
        schedule = {"name": "soon", "at": at, "text": "Right now."}
        since = len(daemon.recorder.seen)
        daemon.write_config(daemon.port, mqtt=mqtt_settings, time_zone="UTC", schedules=[schedule])
        daemon.process.send_signal(signal.SIGHUP)
        _, info, _ = daemon.recorder.wait_for(
            lambda t, p: (
                t == f"{daemon.base}/status/info" and json.loads(p)["config_reload"] is not None
            ),
            since=since,
        )
        assert json.loads(info)["schedules"] == [{"name": "soon", "next": due.timestamp()}]
        job = f"soon-{int(due.timestamp())}"
        queued = daemon.recorder.event(job, "queued")
        assert due.timestamp() <= queued["time"] < due.timestamp() + 1.5
        daemon.recorder.event(job, "finished")
    finally:
        daemon.stop()


def test_runs_missed_while_down_are_reported_once_not_played(
    broker, capture, tmp_path, mqtt_settings
):
    now = datetime.now(timezone.utc)
    down_since = now - timedelta(hours=2)
    (tmp_path / "schedules.json").write_text(json.dumps({"seen_until": down_since.timestamp()}))
    minute = (now.minute + 30) % 60  # its last run was half an hour ago, far past the grace
    hourly = {"name": "hourly", "cron": f"{minute} * * * *", "text": "The hour.", "grace_s": 5}
    daemon = Daemon(
        broker, tmp_path, capture.env(), mqtt=mqtt_settings, time_zone="UTC", schedules=[hourly]
    )
    try:
        missed = daemon.recorder.event(None, "missed")
        assert missed["schedule"] == "hourly" and missed["count"] == 2
        assert down_since.timestamp() < missed["first_due"] < missed["last_due"]
        assert daemon.recorder.events(missed["id"]) == ["missed"]  # reported, not queued
        saved = json.loads((tmp_path / "schedules.json").read_text())["seen_until"]
        assert saved > down_since.timestamp() + 3600
    finally:
        daemon.stop()
