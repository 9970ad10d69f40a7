"""Accepted jobs on disk until they end, so that a crash or a watchdog restart loses none.

Each accepted job is one small JSON file (written to a temporary name, then renamed); it is
removed when the job ends. At start the service queues whatever is left, oldest first. A job
that ended just before a crash may be spoken again: at least once, never lost. When the directory
cannot be written the journal stops and says so; the service goes on without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.box.files import replaced_atomically
from daemon.service.commands import SayCommand

log = logging.getLogger(__name__)

SUFFIX = ".job.json"


class JobJournal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.problem: str | None = None
        self._sequence = time.time_ns()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            self._disable(f"cannot use {directory}: {error.strerror or error}")

    def _disable(self, problem: str) -> None:
        self.problem = problem
        log.warning("job journal disabled: %s; a restart would lose queued jobs", problem)

    def describe(self) -> dict[str, Any]:
        return {"dir": str(self.directory), "problem": self.problem}

    def record(self, command: SayCommand, accepted_at: float) -> Path | None:
        """Writes the job down; its path, or None when the journal cannot be written."""
        if self.problem is not None:
            return None
        self._sequence += 1
        path = self.directory / f"{self._sequence:020d}-{command.id}{SUFFIX}"
        data = {"accepted_at": accepted_at, "command": command.model_dump(mode="json")}
        try:
            with replaced_atomically(path) as out:
                out.write(json.dumps(data).encode())
        except OSError as error:
            self._disable(f"cannot write to {self.directory}: {error.strerror or error}")
            return None
        return path

    @staticmethod
    def done(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            log.warning("cannot remove %s: %s", path, error.strerror or error)

    def pending(self) -> list[tuple[SayCommand, float, Path]]:
        """Jobs accepted before the last stop that never ended, oldest first. An unreadable
        entry is set aside (renamed .bad) with a warning, never half-used."""
        if self.problem is not None:
            return []
        jobs = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                command = SayCommand.model_validate(data["command"])
                jobs.append((command, float(data["accepted_at"]), path))
            except (OSError, ValueError, KeyError, TypeError, ValidationError) as error:
                log.warning("journal entry %s is unreadable (%s); set aside", path.name, error)
                with contextlib.suppress(OSError):
                    path.replace(path.with_suffix(".bad"))
        return jobs
