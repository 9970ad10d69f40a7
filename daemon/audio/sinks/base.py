"""The sink protocol, and `deliver`: a job's joined audio written to each of its sinks."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterable, Sequence
from typing import Protocol

import numpy as np


class Sink(Protocol):
    """One output of a job's audio, opened at the audio's rate, written block by block as
    they are made (float32 mono), closed when they end."""

    @property
    def lead_s(self) -> float:
        """Sound the sink puts before the first sample written (a lead-in): the job's word
        times, counted from its first sample, are heard this much later."""

    @property
    def opening_s(self) -> float:
        """How long before a start instant the sink must be opened to start on time."""

    def open(self, rate: int, start_at: float | None) -> None:
        """Ready for audio at `rate`; with `start_at` (unix time) its first sample is to be
        heard then."""

    def write(self, block: np.ndarray) -> bool:
        """Takes a block (may wait while the output is behind); False once the sink was
        stopped and wants no more."""

    def close(self, complete: bool) -> bool:
        """`complete`: every block was written; else the job ended early (stopped, failed) and
        what it held is dropped. True when all of it reached the output."""


def deliver(
    blocks: Iterable[np.ndarray], sinks: Sequence[Sink], rate: int, start_at: float | None = None
) -> bool:
    """Writes every block to every sink, in step; False when a sink was stopped (the rest is
    not made: a generator of blocks is closed here, on this thread, so its `finally` runs now)
    or did not take it all. A failure while the blocks are made closes each sink incomplete
    and is raised."""
    for number, sink in enumerate(sinks):
        try:
            sink.open(rate, start_at)
        except BaseException:
            with contextlib.suppress(Exception):  # what failed is raised, not the closing
                _close_all(sinks[: number + 1], complete=False)
            raise
    complete = False
    made = iter(blocks)
    try:
        complete = all(all(sink.write(block) for sink in sinks) for block in made)
    finally:
        try:
            if isinstance(made, Generator):
                made.close()
        finally:
            taken = _close_all(sinks, complete)
    return complete and taken


def _close_all(sinks: Sequence[Sink], complete: bool) -> bool:
    """Closes each sink even when one fails (the first failure is raised after)."""
    taken, failure = True, None
    for sink in sinks:
        try:
            taken = sink.close(complete) and taken
        except BaseException as error:
            failure = failure or error
    if failure is not None:
        raise failure
    return taken
