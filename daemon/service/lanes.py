"""Worker lanes: threads that take jobs off the queue, speak and/or publish them, report events.

The service runs one lane that owns the player (and takes any job), and with parallel workers
more that take only publish-only jobs, synthesized at the same time. A lane knows nothing of
MQTT: events and published audio leave through the two callables it is given; its settings are
read from the config in force when a job starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import soxr

from daemon.audio.encoding import encoded
from daemon.audio.pcm_stream import encode_chunk
from daemon.audio.piece import AudioPiece
from daemon.audio.player import Player
from daemon.errors import FastvoiceError, TextError, reason_code
from daemon.service.commands import SayCommand
from daemon.service.jobs import Job, JobQueue
from daemon.service.quiet_hours import quiet_for
from daemon.service.settings import Settings
from daemon.speech.captions import Cue
from daemon.speech.synthesizer import Synthesizer
from daemon.text.script import Script
from daemon.voices.base import SpeechOptions

log = logging.getLogger(__name__)

EmitEvent = Callable[..., None]  # emit(event, job, **fields)
Publish = Callable[[str, bytes], None]


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
        player: Player,
        settings: Settings,
        emit: EmitEvent,
        publish: Publish,
        name: str,
        accepts: Callable[[Job], bool] | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.accepts = accepts
        self.queue = queue
        self.synthesizer = synthesizer
        self.player = player
        self.settings = settings
        self.emit = emit
        self.publish = publish
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
                self.player.stop()

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
        if cap is not None and self.player.volume > 0:  # the box volume times this: at most cap
            volume = min(volume, cap / self.player.volume)
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
        voice = self.synthesizer.voices.get(command.voice)
        rate = voice.info.sample_rate
        pieces = self._sentences(job, rate)
        if command.captions:
            pieces = self._captioned(job, pieces, rate)
        blocks = self.synthesizer.joined(pieces, rate, job.command.sentence_pause_s)
        published: list[np.ndarray] = []
        form, sent_rate = self._published_form(command, rate)
        if command.output in ("publish", "both"):
            assert command.reply_topic is not None
            blocks = self._tee(blocks, published, command.reply_topic, form, rate, sent_rate)
        if command.output in ("play", "both"):
            start_at = None
            if command.at is not None:
                blocks, start_at = self._timed(job, blocks)
            blocks = self._padded(blocks, rate, start_at is not None)
            if not self.player.play(blocks, rate, start_at, job.id) and self._interrupt is None:
                self._interrupt = "stopped"
        else:
            for _ in blocks:
                pass
        if self._interrupt is not None:
            raise Interrupted
        if command.output != "play" and form != "pcm":
            audio = np.concatenate([np.zeros(0, np.float32), *published])
            if sent_rate != rate:
                audio = soxr.resample(audio, rate, sent_rate)
            self.publish(command.reply_topic, encoded(audio, sent_rate, form))

    def _published_form(self, command: SayCommand, rate: int) -> tuple[str, int]:
        """The format and rate published audio goes out in: the job's, else the config's
        (`mqtt.publish_format`, `mqtt.publish_sample_rate`), else WAV at the voice's rate."""
        mqtt = self.settings.config.mqtt
        form = command.format or mqtt.publish_format
        return form, command.sample_rate or mqtt.publish_sample_rate or rate

    def _padded(self, blocks: Iterator[np.ndarray], rate: int, timed: bool) -> Iterator[np.ndarray]:
        """`audio.lead_in_ms` of silence before what is played (not before a timed start: it
        would make the box late) and `audio.tail_ms` after it."""
        audio = self.settings.config.audio
        if audio.lead_in_ms and not timed:
            yield np.zeros(round(rate * audio.lead_in_ms / 1000), np.float32)
        yield from blocks
        if audio.tail_ms:
            yield np.zeros(round(rate * audio.tail_ms / 1000), np.float32)

    def _captioned(self, job: Job, pieces: Iterator[AudioPiece], rate: int) -> Iterator[AudioPiece]:
        """Each sentence's words as an event, when its first piece is made (ahead of its
        audio, which the player still has to reach)."""
        clock = self.synthesizer.word_clock(rate, job.command.sentence_pause_s)
        for piece in pieces:
            words = clock.place(piece)
            if words:
                timed = [Cue(w.start_s, w.end_s, w.word).as_dict() for w in words]
                self.emit("words", job, words=timed)
            yield piece

    def _timed(
        self, job: Job, blocks: Iterator[np.ndarray]
    ) -> tuple[Iterator[np.ndarray], float | None]:
        """A job with `at`, rendered whole ahead, and the instant its first sample is to leave
        the speaker; None to play at once: too late (a `late` event; dropped instead when
        `queue.sync_late_policy` says so)."""
        rendered = list(blocks)
        if self._interrupt is not None:
            raise Interrupted
        assert job.command.at is not None
        start_at = job.command.at / 1000
        late_s = time.time() + self.player.open_s - start_at
        if late_s <= 0:
            return iter(rendered), start_at
        policy = self.settings.config.queue.sync_late_policy
        self.emit("late", job, late_ms=round(late_s * 1000), policy=policy)
        if policy == "drop":
            self._interrupt = "late"
            raise Interrupted
        return iter(rendered), None

    def _tee(
        self,
        blocks: Iterator[np.ndarray],
        kept: list[np.ndarray],
        topic: str,
        form: str,
        rate: int,
        sent_rate: int,
    ) -> Iterator[np.ndarray]:
        """Passes blocks through; PCM chunks go out as they come (at `sent_rate`), the blocks
        of a whole format are kept."""
        if form != "pcm":
            for block in blocks:
                kept.append(block)
                yield block
            return
        resampler = None
        if sent_rate != rate:
            resampler = soxr.ResampleStream(rate, sent_rate, 1, dtype="float32")
        sequence = 0
        for block in blocks:
            sent = block if resampler is None else resampler.resample_chunk(block)
            if sent.size:  # an empty chunk would tell the listener the stream has ended
                self.publish(topic, encode_chunk(sent, sent_rate, sequence))
                sequence += 1
            yield block
        if self._interrupt is None:
            last = np.zeros(0, dtype=np.float32)
            if resampler is not None:
                last = resampler.resample_chunk(last, last=True)
            if last.size:
                self.publish(topic, encode_chunk(last, sent_rate, sequence))
                sequence += 1
            self.publish(topic, encode_chunk(np.zeros(0, dtype=np.float32), sent_rate, sequence))
