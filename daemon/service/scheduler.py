"""Announcements on a schedule: `cron` entries repeat, `at` entries run once, in the config's
time zone. Each run is a job like any other (queued, prioritised, held by quiet hours), with the
id `<name>-<due time>`. The phrase cache is filled ahead, so a run starts on its second.

The last time looked at is kept in a small state file: after a restart, runs that fell due while
the service was down are played if they are at most `grace_s` late, and reported (one `missed`
event per schedule, with the count) if later, never played late.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from daemon.box.files import replaced_atomically
from daemon.config import ScheduleEntry
from daemon.errors import FastvoiceError
from daemon.events import Refusal
from daemon.service.commands import SayCommand
from daemon.service.quiet_hours import local_now
from daemon.service.settings import Settings
from daemon.speech.synthesizer import Synthesizer

log = logging.getLogger(__name__)
LONGEST_WAIT_S = 1.0  # a reload's schedules are taken within this


@dataclass(frozen=True)
class Run:
    name: str
    entry: ScheduleEntry
    due: datetime

    @property
    def job_id(self) -> str:
        return f"{self.name}-{int(self.due.timestamp())}"


def named(entries: list[ScheduleEntry]) -> Iterator[tuple[str, ScheduleEntry]]:
    for index, entry in enumerate(entries):
        yield entry.name_at(index), entry


def runs_between(entries: list[ScheduleEntry], since: datetime, until: datetime) -> list[Run]:
    """Every run due after `since` and up to `until` (aware times), in order."""
    runs = []
    for name, entry in named(entries):
        if entry.at is not None:
            at = entry.at if entry.at.tzinfo else entry.at.replace(tzinfo=since.tzinfo)
            if since < at <= until:
                runs.append(Run(name, entry, at))
            continue
        times = _cron(entry, since)
        while (due := times.get_next(datetime)) <= until:
            runs.append(Run(name, entry, due))
    return sorted(runs, key=lambda run: run.due)


def _cron(entry: ScheduleEntry, start: datetime):
    """The entry's cron times after `start` (croniter and dateutil cost a service without cron
    schedules 40 ms of its start: imported here)."""
    from croniter import croniter

    return croniter(entry.cron, start)


def next_runs(entries: list[ScheduleEntry], now: datetime) -> dict[str, datetime | None]:
    """Each schedule's next run after `now` (None for an `at` that has passed)."""
    upcoming: dict[str, datetime | None] = {}
    for name, entry in named(entries):
        if entry.at is not None:
            at = entry.at if entry.at.tzinfo else entry.at.replace(tzinfo=now.tzinfo)
            upcoming[name] = at if at > now else None
        else:
            upcoming[name] = _cron(entry, now).get_next(datetime)
    return upcoming


class Scheduler(threading.Thread):
    def __init__(
        self,
        settings: Settings,
        submit: Callable[[SayCommand], Refusal | None],
        emit: Callable[..., None],
        synthesizer: Synthesizer,
        state_file: Path,
    ) -> None:
        super().__init__(name="scheduler", daemon=True)
        self.settings = settings
        self.submit = submit
        self.emit = emit
        self.synthesizer = synthesizer
        self.state_file = state_file
        self._stopping = threading.Event()

    def now(self) -> datetime:
        return local_now(self.settings.config.time_zone)

    def shutdown(self) -> None:
        self._stopping.set()

    def upcoming(self) -> list[dict]:
        """For `status/info`: each schedule and its next run (epoch seconds)."""
        runs = next_runs(self.settings.config.schedules, self.now())
        return [{"name": n, "next": t and t.timestamp()} for n, t in runs.items()]

    def run(self) -> None:
        for name, entry in named(self.settings.config.schedules):
            try:
                self._render_ahead(entry)
            except FastvoiceError as error:  # it will fail as a job too, with its event
                log.error("schedule %s: cannot render ahead: %s", name, error)
        seen = self._seen() or self.now()
        self._save(seen)
        while True:
            now = self.now()
            runs = runs_between(self.settings.config.schedules, seen, now)
            if runs:
                self._take(runs, now)
                self._save(now)
            seen = now
            upcoming = [t for t in next_runs(self.settings.config.schedules, now).values() if t]
            wait = min([LONGEST_WAIT_S, *((t - now).total_seconds() for t in upcoming)])
            if self._stopping.wait(max(0.0, wait)):
                return

    def _render_ahead(self, entry: ScheduleEntry) -> None:
        """Into the phrase cache, where there is one: the run then starts at once."""
        if self.synthesizer.cache is None:
            return
        chime = self.settings.config.sounds.chime_for(entry.chime, entry.priority)
        for _ in self.synthesizer.synthesize(entry.text, entry.voice, chime=chime):
            pass

    def _take(self, runs: list[Run], now: datetime) -> None:
        missed: dict[str, list[Run]] = {}
        for run in runs:
            if (now - run.due).total_seconds() > run.entry.grace_s:
                missed.setdefault(run.name, []).append(run)
                continue
            entry = run.entry
            command = SayCommand(
                id=run.job_id,
                text=entry.text,
                voice=entry.voice,
                chime=entry.chime,
                priority=entry.priority,
                volume=entry.volume,
            )
            refused = self.submit(command)
            if refused is not None:
                log.error("schedule %s: run of %s refused: %s", run.name, run.due, refused)
        for name, late in missed.items():
            self.emit(
                "missed",
                None,
                id=late[-1].job_id,
                schedule=name,
                count=len(late),
                first_due=late[0].due.timestamp(),
                last_due=late[-1].due.timestamp(),
            )

    def _seen(self) -> datetime | None:
        try:
            seen = json.loads(self.state_file.read_text())["seen_until"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return datetime.fromtimestamp(seen, self.now().tzinfo)

    def _save(self, seen: datetime) -> None:
        try:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            with replaced_atomically(self.state_file) as handle:
                handle.write(json.dumps({"seen_until": seen.timestamp()}).encode())
        except OSError as error:
            log.warning("cannot keep the schedules' state in %s: %s", self.state_file, error)
