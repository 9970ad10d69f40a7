"""Accepting jobs from every interface (MQTT, Hermes, the local socket): checked, journalled,
queued, each with its `queued` or `rejected` event; and the jobs a restart cut off, queued again."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from daemon.audio.sounds import SoundLibrary
from daemon.errors import FastvoiceError, reason_code
from daemon.events import Refusal
from daemon.service.commands import SayCommand
from daemon.service.event_sink import EventSink
from daemon.service.jobs import DuplicateJob, Job, JobQueue, QueueFull
from daemon.service.journal import JobJournal
from daemon.service.lanes import Lane, publish_only
from daemon.service.quiet_hours import quiet_for
from daemon.service.settings import Settings
from daemon.service.text_feed import TextFeed
from daemon.text.prepare import prepare
from daemon.text.script import Script, Sound
from daemon.voices.registry import VoiceRegistry


class JobIntake:
    def __init__(
        self,
        *,
        settings: Settings,
        voices: VoiceRegistry,
        queue: JobQueue,
        journal: JobJournal | None,
        events: EventSink,
        lanes: Sequence[Lane],
    ) -> None:
        self.settings = settings
        self.voices = voices
        self.queue = queue
        self.journal = journal
        self.events = events
        self.lanes = lanes
        self._admitting = threading.Lock()

    def choose_voice(self, name: str | None, language: str | None = None) -> str:
        """The voice a request naming `name` (a voice, or an alias of `http.voice_aliases`) or
        asking for `language` gets, for every interface; VoiceError names what is wrong."""
        if name:
            name = self.settings.config.http.voice_aliases.get(name, name)
        return self.voices.choose(name, language)

    def voice_for(self, command: SayCommand) -> str:
        """The voice that speaks `command` (its speaker checked); VoiceError."""
        voice = self.choose_voice(command.voice, command.language)
        self.voices.get(voice).check_speaker(command.speaker)
        return voice

    def prepared(self, command: SayCommand) -> tuple[str, Script, str]:
        """Its voice, its text prepared and its chime (each sound checked); raises what a
        request cannot have (VoiceError, TextError, SoundError)."""
        sounds = self.settings.config.sounds
        chime = sounds.chime_for(command.chime, command.priority)
        voice = self.voice_for(command)
        script = prepare(command.text, self.settings.config.text, voice, self.voices)
        library = SoundLibrary(sounds.dir)
        for name in [chime, *(item.name for item in script if isinstance(item, Sound))]:
            library.check(name)
        return voice, script, chime

    def submit(
        self, command: SayCommand, durable: bool = True, more_text: TextFeed | None = None
    ) -> Refusal | None:
        """Checks and queues a command. None when accepted, else why not (also sent as a
        `rejected` event). `durable`: journalled, so that a restart queues it again (a job of
        the fleet's render queue is not: the fleet hands it to another box instead).
        `more_text`: the rest of its text, still arriving (never journalled: a restart could
        not bring it back)."""
        try:
            voice, script, chime = self.prepared(command)
        except FastvoiceError as error:
            reason = reason_code(error)  # as every interface reports it (daemon.errors)
            self.events.emit("rejected", None, id=command.id, reason=reason, message=str(error))
            return Refusal(reason, str(error))
        update: dict[str, object] = {"voice": voice, "chime": chime}
        if command.sync and command.at is None:
            lead_s = self.settings.config.queue.sync_lead_s
            update["at"] = round((time.time() + lead_s) * 1000)
        command = command.model_copy(update=update)
        job = Job(command, received=self.queue.clock(), script=script, more_text=more_text)
        # Journalled before the queue: a lane may end it at once.
        if self.journal is not None and durable and more_text is None:
            job.journal = self.journal.record(command, time.time())
        quiet = None if publish_only(job) else quiet_for(self.settings.config)
        held = quiet is not None and quiet.holds(command.priority)
        refused = self._enqueue(job, **({"quiet_until": quiet.ends.timestamp()} if held else {}))
        if refused is None and command.priority == "critical":
            self._make_room(job)
        return refused

    def recover(self) -> None:
        """Queues the jobs a crash or a restart cut off, as they were accepted."""
        if self.journal is None:
            return
        for command, accepted_at, path in self.journal.pending():
            waited_s = max(0.0, time.time() - accepted_at)  # expiry counts from acceptance
            job = Job(command, received=self.queue.clock() - waited_s, journal=path)
            self._enqueue(job, recovered=True)

    def _enqueue(self, job: Job, **fields: Any) -> Refusal | None:
        """Queues a job with its `queued` event; or its `rejected` event and why (which also
        drops its journal entry). `queued` is out before a lane can see the job, so no
        interface ever hears `started` or `failed` first; the lock keeps any other
        submission from taking the room between the admission and the push."""
        with self._admitting:
            try:
                self.queue.admit(job)
            except DuplicateJob:
                message = "this id was already accepted"
                self.events.emit("rejected", job, reason="duplicate", message=message)
                return Refusal("duplicate", message)
            except QueueFull:
                message = f"{self.queue.max_jobs} jobs already queued"
                self.events.emit("rejected", job, reason="queue_full", message=message)
                return Refusal("queue_full", message)
            self.events.accepted()
            depth = len(self.queue) + 1
            priority = job.command.priority
            self.events.emit("queued", job, priority=priority, queue_depth=depth, **fields)
            self.queue.push(job)
        return None

    def _make_room(self, job: Job) -> None:
        """A critical job cuts short a non-critical one it would otherwise wait for."""
        lanes = [lane for lane in self.lanes if lane.takes(job)]
        if any(lane.current is None for lane in lanes):
            return
        for lane in lanes:
            current = lane.current
            if current is not None and current.command.priority != "critical":
                lane.interrupt("critical")
                return
