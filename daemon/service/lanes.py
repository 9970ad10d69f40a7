"""Worker lanes: threads that take jobs off the queue, speak and/or publish them, report events.

The service runs one lane that owns the player (and takes any job), and with parallel workers
more that take only publish-only jobs, synthesized at the same time. A lane keeps the queue's
policy (priority, interruption, quiet hours, a timed start) and knows nothing of its outputs:
a job's audio goes to the sinks `JobOutputs` chooses for it, its events through the callable
it is given; its settings are read from the config in force when a job starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from daemon.audio.piece import AudioPiece
from daemon.audio.sinks import deliver
from daemon.errors import FastvoiceError, TextError, reason_code
from daemon.service.jobs import Job, JobQueue
from daemon.service.outputs import JobOutputs
from daemon.service.quiet_hours import quiet_for
from daemon.service.settings import Settings
from daemon.speech.captions import Cue
from daemon.speech.synthesizer import Synthesizer
from daemon.text.script import Script
from daemon.voices.base import SpeechOptions

log = logging.getLogger(__name__)

EmitEvent = Callable[..., None]  # emit(event, job, **fields)


class Interrupted(Exception):
    pass


def publish_only(job: Job) -> bool:
    """Jobs that never touch the player, so any number can run side by side."""
    return job.command.output == "publish"


class Lane(threading.Thread):
    def __init__(
        self,
        *,
        queue: JobQueue,
        synthesizer: Synthesizer,
        outputs: JobOutputs,
        settings: Settings,
        emit: EmitEvent,
        name: str,
        accepts: Callable[[Job], bool] | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.accepts = accepts
        self.queue = queue
        self.synthesizer = synthesizer
        self.outputs = outputs
        self.settings = settings
        self.emit = emit
        self.current: Job | None = None
        self.heartbeat = time.monotonic()
        self._interrupt: str | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.is_set():
            self.heartbeat = time.monotonic()
            job = self.queue.get(timeout=0.5, accepts=self._takes_now)
            if job is not None:
                self._run(job)

    def shutdown(self) -> None:
        self._stopping.set()
        self.interrupt("shutdown")

    def takes(self, job: Job) -> bool:
        return self.accepts is None or self.accepts(job)

    def _takes_now(self, job: Job) -> bool:
        """A job this lane takes, unless quiet hours hold it (a job that plays here, below the
        window's priority): asked at every look into the queue, so a window's end or a reload
        releases it within one poll."""
        if not self.takes(job):
            return False
        quiet = None if publish_only(job) else quiet_for(self.settings.config)
        return quiet is None or not quiet.holds(job.command.priority)

    def interrupt(self, reason: str) -> None:
        """Cut the current job short (from any thread); it ends with `interrupted`."""
        current = self.current
        if current is not None:
            self._interrupt = reason
            if not publish_only(current):
                self.outputs.stop_playing()

    def _run(self, job: Job) -> None:
        self.current, self._interrupt = job, None
        job.started, job.first_audio, job.synthesis_s, job.audio_s = (
            time.monotonic(),
            None,
            0.0,
            0.0,
        )
        self.emit("started", job)
        try:
            self._speak(job)
        except Interrupted:
            pass
        except FastvoiceError as error:
            self.emit("failed", job, reason=reason_code(error), message=str(error))
            return
        except Exception as error:
            log.exception("job %s failed", job.id)
            self.emit("failed", job, reason="internal", message=repr(error))
            return
        finally:
            self.current = None
            if job.more_text is not None:
                job.more_text.abandon()
        if self._interrupt is None:
            self.emit("finished", job, **job.timings())
            return
        requeue = self._interrupt == "critical" and self.settings.config.queue.resume_interrupted
        # Cut off by a shutdown, it stays in the job journal and is spoken after the restart.
        resumes = requeue or self._interrupt == "shutdown"
        self.emit(
            "interrupted", job, reason=self._interrupt, will_resume=resumes or None, **job.timings()
        )
        if requeue:
            self.queue.push(job)

    def _sentences(self, job: Job, rate: int) -> Iterator[AudioPiece]:
        command = job.command
        volume = 1.0 if command.volume is None else command.volume
        quiet = None if publish_only(job) else quiet_for(self.settings.config)
        cap = None if quiet is None else quiet.volume_cap(command.priority)
        box_volume = self.outputs.player.volume
        if cap is not None and box_volume > 0:  # the box volume times this: at most cap
            volume = min(volume, cap / box_volume)
        options = SpeechOptions(speaker=command.speaker, volume=volume, rate=command.rate)
        for text, script, chime, arrived in self._texts(job):
            chunks = self.synthesizer.synthesize(
                text, command.voice, options, chime=chime, script=script
            )
            while True:
                started = time.monotonic()
                try:
                    chunk = next(chunks, None)
                except TextError as error:
                    if not arrived:
                        raise
                    # A piece of an answer still arriving ("...", a markdown rule): the rest
                    # of the answer is still spoken.
                    log.warning("job %s: a piece of its text was skipped: %s", job.id, error)
                    chunk = None
                job.synthesis_s += time.monotonic() - started
                self.heartbeat = time.monotonic()
                if self._interrupt is not None:
                    raise Interrupted
                if chunk is None:
                    break
                if job.first_audio is None:
                    job.first_audio, job.cache_hit = time.monotonic(), chunk.from_cache
                job.audio_s += len(chunk.samples) / rate
                yield chunk

    def _texts(self, job: Job) -> Iterator[tuple[str, Script | None, str | None, bool]]:
        """The job's text (prepared at intake) and its chime, then the text still arriving,
        piece by piece, until its sender ends it (meanwhile the player plays silence); each
        with whether it arrived after the job was accepted."""
        yield job.command.text, job.script, job.command.chime, False
        feed = job.more_text
        while feed is not None:
            text = feed.take(wait_s=0.5)
            self.heartbeat = time.monotonic()  # waiting for an answer's next words: no stall
            if self._interrupt is not None:
                raise Interrupted
            if text is None:
                return
            if text.strip():
                yield text, None, None, True

    def _speak(self, job: Job) -> None:
        command = job.command
        rate = self.synthesizer.voices.get(command.voice).info.sample_rate
        played = self.outputs.played(job)
        # Published first: each block goes out before the device may wait for room for it,
        # and the stream's end before the device drains.
        sinks = [*self.outputs.published(job), *played]
        pieces = self._sentences(job, rate)
        if command.captions:  # timed as heard where it plays (after a lead-in)
            lead_s = max((sink.lead_s for sink in played), default=0.0)
            pieces = self._captioned(job, pieces, rate, lead_s)
        blocks = self.synthesizer.joined(pieces, rate, command.sentence_pause_s)
        start_at = None
        if command.at is not None and played:
            opening_s = max(sink.opening_s for sink in played)
            blocks, start_at = self._timed(job, blocks, opening_s)
        if not deliver(blocks, sinks, rate, start_at) and self._interrupt is None:
            self._interrupt = "stopped"
        if self._interrupt is not None:
            raise Interrupted

    def _captioned(
        self, job: Job, pieces: Iterator[AudioPiece], rate: int, lead_s: float
    ) -> Iterator[AudioPiece]:
        """Each sentence's words as an event, when its first piece is made (ahead of its
        audio, which the player still has to reach), `lead_s` later than in the joined audio:
        when they are heard."""
        clock = self.synthesizer.word_clock(rate, job.command.sentence_pause_s, lead_s)
        for piece in pieces:
            words = clock.place(piece)
            if words:
                timed = [Cue(w.start_s, w.end_s, w.word).as_dict() for w in words]
                self.emit("words", job, words=timed)
            yield piece

    def _timed(
        self, job: Job, blocks: Iterator[np.ndarray], opening_s: float
    ) -> tuple[Iterator[np.ndarray], float | None]:
        """A job with `at`, rendered whole ahead, and the instant its first sample is to leave
        the speaker; None to play at once: too late (a `late` event; dropped instead when
        `queue.sync_late_policy` says so)."""
        rendered = list(blocks)
        if self._interrupt is not None:
            raise Interrupted
        assert job.command.at is not None
        start_at = job.command.at / 1000
        late_s = time.time() + opening_s - start_at
        if late_s <= 0:
            return iter(rendered), start_at
        policy = self.settings.config.queue.sync_late_policy
        self.emit("late", job, late_ms=round(late_s * 1000), policy=policy)
        if policy == "drop":
            self._interrupt = "late"
            raise Interrupted
        return iter(rendered), None
