"""`quiet_hours` and `schedules`: when announcements wait or play quieter, and those made on a
schedule."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from daemon.config.base import SoundName, StrictModel, VoiceName

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _clock_time(value: str) -> str:
    if not re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]", value):
        raise ValueError(f"{value!r} is not a time of day as HH:MM (00:00 to 23:59)")
    return value


ClockTime = Annotated[str, AfterValidator(_clock_time)]


class QuietWindow(StrictModel):
    """A time of the week when announcements wait or play quieter (daemon.service.quiet_hours)."""

    start: ClockTime = Field(alias="from", description="HH:MM, when the window begins")
    end: ClockTime = Field(alias="to", description="HH:MM; before `from`: the next day")
    days: list[Weekday] = Field(
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        min_length=1,
        description="the days the window begins on",
    )
    max_volume: float = Field(0.3, ge=0.0, le=1.0, description="loudest a job plays (not critical)")
    defer_below: Literal["normal", "high", "critical"] | None = Field(
        "high", description="jobs of a lower priority wait for the window's end; null: none wait"
    )

    @model_validator(mode="after")
    def _not_empty(self) -> QuietWindow:
        if self.start == self.end:
            raise ValueError(f"from and to are both {self.start}: the window would be empty")
        return self


class ScheduleEntry(StrictModel):
    """An announcement made on a schedule (daemon.service.scheduler): `cron` repeats, `at` once."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")] | None = Field(
        None, description="in job ids, events and status (default: schedule-<index>)"
    )
    cron: str | None = Field(None, description="five-field cron expression, in time_zone")
    at: datetime | None = Field(None, description="once, at this local time (ISO 8601)")
    text: str = Field(min_length=1, description="what to say (SSML when it starts with <speak)")
    voice: VoiceName | None = None
    chime: SoundName | None = None
    priority: Literal["low", "normal", "high", "critical"] = "normal"
    volume: float | None = Field(None, ge=0.0, le=1.0)
    grace_s: float = Field(
        60.0, ge=0.0, le=86_400, description="a run missed by longer (service down) is reported"
    )

    def name_at(self, index: int) -> str:
        """Its name, or the default name of the entry at `index` of `schedules`."""
        return self.name or f"schedule-{index}"

    @model_validator(mode="after")
    def _cron_or_at(self) -> ScheduleEntry:
        if (self.cron is None) == (self.at is None):
            raise ValueError("give either cron (repeating) or at (once)")
        if self.cron is not None:
            from croniter import croniter

            if len(self.cron.split()) != 5 or not croniter.is_valid(self.cron):
                raise ValueError(
                    f"cron {self.cron!r} is not a five-field cron expression (minute hour "
                    "day-of-month month day-of-week, e.g. '0 21 * * *')"
                )
        return self
