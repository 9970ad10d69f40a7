"""The tests' sink, written against the public protocol only (daemon.audio.sinks.Sink): it
keeps what a job's audio would have been at an output, block by block, with how it ended. A
new output is a class like this one (and its config model)."""

from __future__ import annotations

import threading

import numpy as np

from daemon.audio.player import Player
from daemon.config import AudioConfig
from daemon.service.commands import SayCommand
from daemon.service.jobs import Job, JobQueue
from daemon.service.lanes import Lane
from daemon.service.outputs import JobOutputs
from daemon.service.settings import Settings
from daemon.speech.synthesizer import Synthesizer


class RecordingSink:
    lead_s = 0.0
    opening_s = 0.0

    def __init__(self, stop_after_blocks: int | None = None) -> None:
        """`stop_after_blocks`: wants no more after that many (an output that went away)."""
        self.stop_after_blocks = stop_after_blocks
        self.rate: int | None = None
        self.start_at: float | None = None
        self.blocks: list[np.ndarray] = []
        self.complete: bool | None = None  # how `close` was called; None while open
        self.closed = threading.Event()

    def open(self, rate: int, start_at: float | None) -> None:
        self.rate, self.start_at = rate, start_at

    def write(self, block: np.ndarray) -> bool:
        self.blocks.append(block.copy())
        return self.stop_after_blocks is None or len(self.blocks) < self.stop_after_blocks

    def close(self, complete: bool) -> bool:
        self.complete = complete
        self.closed.set()
        return complete

    @property
    def audio(self) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.float32), *self.blocks])


class Emitted:
    """The events a lane emits, and a wait for a job's last one."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []
        self.ended = threading.Event()

    def __call__(self, event: str, job: Job | None, **fields) -> None:
        self.events.append((event, fields))
        if event in ("finished", "failed", "interrupted"):
            self.ended.set()


def run_lane(
    synthesizer: Synthesizer, command: SayCommand, audio: dict
) -> tuple[RecordingSink, Emitted]:
    """One job through a real lane with the synthesizer's config and `audio` settings, its
    played outputs those of the config (no device in these tests: `audio.file_dir`) and a
    recording sink."""
    settings = Settings(
        synthesizer.settings.config.model_copy(update={"audio": AudioConfig(**audio)})
    )
    recorder, emitted = RecordingSink(), Emitted()
    outputs = JobOutputs(settings, Player(device="none"), lambda *_: None, [lambda _job: recorder])
    queue = JobQueue(10)
    lane = Lane(
        queue=queue,
        synthesizer=synthesizer,
        outputs=outputs,
        settings=settings,
        emit=emitted,
        name="test-lane",
    )
    lane.start()
    job = Job(command)
    queue.admit(job)
    queue.push(job)
    try:
        assert emitted.ended.wait(60)
    finally:
        lane.shutdown()
        lane.join(5)
    return recorder, emitted
