"""Quiet hours: the windows' logic with given clocks, and a running service holding and capping
jobs in a window that covers now, then letting the held job go when a reload ends the window."""

from __future__ import annotations

import json
import signal
import uuid
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from daemon.config import QuietWindow, parse_config
from daemon.errors import ConfigError
from daemon.service.quiet_hours import quiet_now
from tests.daemon_helpers import Daemon, say

BERLIN = ZoneInfo("Europe/Berlin")
NIGHTS = QuietWindow.model_validate({"from": "22:00", "to": "07:00", "days": ["fri"]})
LUNCH = QuietWindow.model_validate({"from": "12:00", "to": "13:30", "defer_below": None})


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """December 2026: the 4th is a Friday."""
    return datetime(2026, 12, day, hour, minute, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("now", "ends"),
    [
        (at(4, 22), at(5, 7)),  # Friday night, from its start
        (at(5, 6, 59), at(5, 7)),  # the Saturday morning of Friday's window
        (at(5, 7), None),  # its end is outside
        (at(4, 21, 59), None),
        (at(3, 23), None),  # Thursday night: not a day of the window
        (at(5, 23), None),  # Saturday night neither
        (at(7, 12, 30), at(7, 13, 30)),  # a window within a day, every day
        (at(7, 13, 30), None),
    ],
)
def test_a_window_holds_from_its_start_to_its_end_on_its_days(now, ends):
    quiet = quiet_now([NIGHTS, LUNCH], now)
    assert (quiet and quiet.ends) == ends


def test_the_time_zone_is_the_windows_own():
    utc_evening = datetime(2026, 12, 4, 21, 30, tzinfo=timezone.utc)  # 22:30 in Berlin
    assert quiet_now([NIGHTS], utc_evening.astimezone(BERLIN)) is not None
    assert quiet_now([NIGHTS], utc_evening) is None  # 21:30 where the windows are in UTC


def test_below_the_window_priority_waits_the_rest_is_capped_critical_is_not():
    quiet = quiet_now([NIGHTS], at(4, 23))
    assert [quiet.holds(p) for p in ("low", "normal", "high", "critical")] == [
        True,
        True,
        False,
        False,
    ]
    assert quiet.volume_cap("high") == 0.3 and quiet.volume_cap("critical") is None
    assert not quiet_now([LUNCH], at(7, 12, 15)).holds("low")  # defer_below: null


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"quiet_hours": [{"from": "7", "to": "08:00"}]}, "quiet_hours.0.from: '7' is not a time"),
        ({"quiet_hours": [{"from": "08:00", "to": "08:00"}]}, "would be empty"),
        ({"quiet_hours": [{"from": "22:00", "to": "07:00", "days": []}]}, "quiet_hours.0.days"),
        ({"quiet_hours": [{"from": "22:00", "to": "07:00", "volume": 1}]}, "volume: unknown"),
        ({"time_zone": "Europe/Atlantis"}, "time_zone: 'Europe/Atlantis' is not a known"),
    ],
)
def test_a_broken_window_is_named_by_its_key(document, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(document)


def test_the_service_holds_low_jobs_caps_high_ones_and_lets_go_when_the_window_ends(
    broker, capture, tmp_path
):
    now = datetime.now(timezone.utc)
    window = {
        "from": (now - timedelta(hours=1)).strftime("%H:%M"),
        "to": (now + timedelta(hours=1)).strftime("%H:%M"),
        "max_volume": 0.3,
        "defer_below": "high",
    }
    config = {"time_zone": "UTC", "quiet_hours": [window]}
    mqtt = {"client_id": f"fv-{uuid.uuid4().hex[:6]}"}
    daemon = Daemon(broker, tmp_path, capture.env(), mqtt=mqtt, **config)
    try:
        recorder = daemon.recorder
        held = say(daemon, text="The bins go out tomorrow.", priority="normal")
        queued = recorder.event(held, "queued")
        assert queued["quiet_until"] > now.timestamp()

        def peak_of(priority: str) -> float:
            capture.reset()
            job = say(daemon, text="Someone is at the door.", priority=priority)
            recorder.event(job, "finished")
            return float(np.abs(capture.played()).max())

        capped, full = peak_of("high"), peak_of("critical")
        assert capped == pytest.approx(0.3 * full, rel=0.05)
        assert recorder.events(held) == ["queued"]  # still waiting, after both played

        since = len(recorder.seen)
        daemon.write_config(daemon.port, mqtt=mqtt, time_zone="UTC", quiet_hours=[])
        daemon.process.send_signal(signal.SIGHUP)
        info = recorder.wait_for(
            lambda t, p: (
                t == f"{daemon.base}/status/info" and json.loads(p)["config_reload"] is not None
            ),
            since=since,
        )
        assert json.loads(info[1])["quiet_hours_now"] is None
        recorder.event(held, "finished")
    finally:
        daemon.stop()
