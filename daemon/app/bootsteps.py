"""The service's parts as steps (after Celery's bootsteps): each a name, how it starts and how
it stops. They start in the order listed, which the composition root writes downstream first
(voices, the broker, the lanes, then the interfaces that feed them), and stop in reverse, so no
part is fed after what it feeds has stopped."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Step:
    name: str
    start: Callable[[], None]
    stop: Callable[[], None] = _nothing


class Steps:
    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self._started: list[Step] = []

    def start(self) -> None:
        for step in self.steps:
            log.debug("starting %s", step.name)
            step.start()
            self._started.append(step)

    def stop(self) -> None:
        """Stops what started, last first; one part failing to stop does not keep the others
        running."""
        while self._started:
            step = self._started.pop()
            log.debug("stopping %s", step.name)
            try:
                step.stop()
            except Exception:
                log.exception("%s failed to stop", step.name)
