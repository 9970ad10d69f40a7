"""The one front door of the speech service: what every adapter (MQTT, HTTP, Wyoming, Hermes,
the local socket, the fleet's render queue) may ask of it. Adapters parse their transport's
messages and call these methods; none of them touches the queue, the lanes, the player or the
synthesizer itself, so each rule (who may stop what, what a volume change tells the others)
lives here once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from daemon.audio.player import Player
from daemon.config import Config
from daemon.events import Refusal
from daemon.service.commands import SayCommand
from daemon.service.event_sink import EventSink, Listener
from daemon.service.intake import JobIntake
from daemon.service.jobs import Job, JobQueue
from daemon.service.lanes import Lane
from daemon.service.settings import Settings
from daemon.service.text_feed import TextFeed
from daemon.speech.rendering import Rendering
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions, VoiceInfo
from daemon.voices.registry import BrokenVoice

log = logging.getLogger(__name__)

# Which part of the box's state changed: "volume", "pause" or "voice".
StateListener = Callable[[str], None]


class FrontDoor:
    def __init__(
        self,
        *,
        settings: Settings,
        intake: JobIntake,
        queue: JobQueue,
        lanes: Sequence[Lane],
        player: Player,
        synthesizer: Synthesizer,
        events: EventSink,
    ) -> None:
        self.settings = settings
        self._intake = intake
        self._queue = queue
        self._lanes = lanes
        self._player = player
        self._synthesizer = synthesizer
        self._voices = synthesizer.voices
        self._events = events
        self.state_listeners: list[StateListener] = []

    @property
    def config(self) -> Config:
        """The config in force (a reload replaces it)."""
        return self.settings.config

    # --- jobs ---

    def submit(
        self, command: SayCommand, durable: bool = True, more_text: TextFeed | None = None
    ) -> Refusal | None:
        """Queues a job: None when accepted, else why not (also sent as a `rejected` event).
        `more_text`: the rest of its text, put there as it arrives."""
        return self._intake.submit(command, durable, more_text)

    def reject(self, message: str, job_id: str | None = None) -> None:
        """A command an adapter could not parse: a `rejected` event naming the problem."""
        self._events.emit("rejected", None, id=job_id, reason="invalid", message=message)

    def stop_job(self, job_id: str) -> bool:
        """Stops one job, playing or queued; False when there is no such job."""
        queued = self._queue.remove(job_id)
        if queued is not None:
            self._stopped_in_queue(queued, "removed from the queue")
            return True
        playing = [lane for lane in self._lanes if _playing(lane, job_id)]
        for lane in playing:
            lane.interrupt("stopped")
        return bool(playing)

    def stop(self, *, everything: bool) -> None:
        """Stops what is playing (and with `everything`, clears the queue)."""
        if everything:
            for job in self._queue.clear():
                self._stopped_in_queue(job, "cleared from the queue")
        for lane in self._lanes:
            lane.interrupt("stopped")

    def _stopped_in_queue(self, job: Job, message: str) -> None:
        """A queued job stopped: `interrupted`, unless its expiry had come (the expiry watch
        had yet to take it out): then it ended expired, as it would have a moment later."""
        if self._queue.expired(job):
            self._events.expired(job)
        else:
            self._events.emit("interrupted", job, reason="stopped", message=message)

    def jobs(self) -> list[dict[str, Any]]:
        """The jobs playing, then those queued in the order they will play."""
        playing = [_job_view(lane.current, "playing") for lane in self._lanes if lane.current]
        return playing + [_job_view(job, "queued") for job in self._queue.snapshot()]

    def listen(self, listener: Listener) -> None:
        """`listener` hears every job event (on the service's threads)."""
        self._events.listeners.append(listener)

    # --- the box's state ---

    @property
    def volume(self) -> float:
        return self._player.volume

    def set_volume(self, volume: float) -> None:
        self._player.volume = volume
        self.changed("volume")

    @property
    def paused(self) -> bool:
        return self._queue.paused

    def set_paused(self, paused: bool) -> None:
        """Pauses what is playing and the queue; jobs keep being accepted."""
        self._queue.set_paused(paused)
        self._player.paused = paused
        self.changed("pause")

    @property
    def default_voice(self) -> str:
        """The voice of requests that name none (the embedded one while the chosen is broken)."""
        return self._voices.default

    def set_default_voice(self, name: str) -> None:
        """Chooses the voice of requests that name none, until another choice or a reload that
        changes the config's `voice` (a reload of an unchanged file keeps it); raises
        VoiceError for a voice the box does not have."""
        self._voices.require(name)
        self._voices.set_default(name)
        self.changed("voice")

    def changed(self, part: str) -> None:
        """Tells the state listeners that `part` changed ("volume", "pause" or "voice")."""
        for listener in self.state_listeners:
            try:
                listener(part)
            except Exception:
                log.exception("state listener failed on %s", part)

    # --- voices and sounds ---

    def voices(self) -> list[VoiceInfo]:
        """The voices that can speak now (configured and installed), loaded."""
        return [self._voices.get(name).info for name in self._voices.usable()]

    def voice_names(self) -> list[str]:
        """Every voice a request may name, loaded or not."""
        return self._voices.names

    def broken_voices(self) -> list[BrokenVoice]:
        return list(self._voices.broken.values())

    def choose_voice(self, name: str | None, language: str | None = None) -> str:
        """The voice a request naming `name` (or an alias) or asking for `language` gets, as
        every interface chooses it (VoiceError)."""
        return self._intake.choose_voice(name, language)

    def voice_info(self, name: str | None = None) -> VoiceInfo:
        """A voice's info (the default voice's without a name); raises VoiceError."""
        return self._voices.get(name).info

    def times_words(self, name: str | None = None) -> bool:
        return self._voices.get(name).times_words

    def sound_names(self) -> list[str]:
        return self._synthesizer.sounds.names()

    # --- speech beside the queue ---

    def check(self, request: SayCommand) -> None:
        """Raises what `submit` would refuse `request` for (VoiceError, TextError, SoundError)."""
        self._intake.prepared(request)

    def render(self, request: SayCommand, *, streamed: bool = True) -> Rendering:
        """The audio of a request answered beside the queue (HTTP, Wyoming), as `fastvoice say`
        makes it, in its turn among those requests: its voice chosen as for every interface
        and its text prepared once, now (VoiceError, TextError before any audio). Not
        `streamed` when the answer goes out whole (an encoded file): then in as few decoder
        runs as allowed."""
        voice = self._intake.voice_for(request)
        volume = 1.0 if request.volume is None else request.volume
        options = SpeechOptions(speaker=request.speaker, rate=request.rate, volume=volume)
        return self._synthesizer.render(
            request.text, voice, options, pause_s=request.sentence_pause_s, streamed=streamed
        )


def _playing(lane: Lane, job_id: str) -> bool:
    return lane.current is not None and lane.current.id == job_id


def _job_view(job: Job, state: str) -> dict[str, Any]:
    command = job.command
    return {
        "id": job.id,
        "state": state,
        "priority": command.priority,
        "voice": command.voice,
        "text": command.text[:200],
        "output": command.output,
    }
