"""Quiet hours: windows of the week in which announcements below a priority wait for the window
to end and the others play no louder than a cap (critical ones always at full volume).

A window is given in the box's time zone (or `time_zone`); one that ends before it starts runs
past midnight, and its `days` name the day it starts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from daemon.config import Config, QuietWindow
from daemon.service.commands import PRIORITY_RANK

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True)
class QuietNow:
    """The window in force and when it ends."""

    window: QuietWindow
    ends: datetime

    def holds(self, priority: str) -> bool:
        """Whether a job of `priority` waits for the window's end."""
        below = self.window.defer_below
        return below is not None and PRIORITY_RANK[priority] > PRIORITY_RANK[below]

    def volume_cap(self, priority: str) -> float | None:
        return None if priority == "critical" else self.window.max_volume

    def as_dict(self) -> dict:
        return {
            "until": self.ends.timestamp(),
            "max_volume": self.window.max_volume,
            "defer_below": self.window.defer_below,
        }


def quiet_for(config: Config) -> QuietNow | None:
    """The quiet window the config puts now in, if any."""
    if not config.quiet_hours:
        return None
    return quiet_now(config.quiet_hours, local_now(config.time_zone))


def local_now(time_zone: str | None) -> datetime:
    """Now, in `time_zone` or the box's own."""
    return datetime.now(ZoneInfo(time_zone)) if time_zone else datetime.now().astimezone()


def quiet_now(windows: list[QuietWindow], now: datetime) -> QuietNow | None:
    """The window `now` (an aware time in the zone the windows are given in) falls in, the one
    ending last where several do."""
    found: list[QuietNow] = []
    for window in windows:
        start, end = _clock(window.start), _clock(window.end)
        for days_back in (0, 1):  # today's window, or yesterday's running past midnight
            day = now.date() - timedelta(days=days_back)
            if WEEKDAYS[day.weekday()] not in window.days:
                continue
            begins = datetime.combine(day, start, now.tzinfo)
            ends = datetime.combine(day + timedelta(days=end <= start), end, now.tzinfo)
            if begins <= now < ends:
                found.append(QuietNow(window, ends))
    return max(found, key=lambda q: q.ends) if found else None


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))
