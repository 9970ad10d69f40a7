"""The commands under the base topic (`say`, `stop`, `volume`, `pause`, `voice`): parsed on
paho's thread, acted on at once (nothing slow), their state topics published retained. The
HTTP interface acts through the same methods, so both report the same state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from daemon.audio.player import Player
from daemon.errors import VoiceError
from daemon.mqtt.payloads import (
    CommandError,
    check_reply_topic,
    parse_pause,
    parse_say,
    parse_stop,
    parse_voice,
    parse_volume,
)
from daemon.service.event_sink import EventSink
from daemon.service.intake import JobIntake
from daemon.service.jobs import JobQueue
from daemon.service.lanes import Lane
from daemon.service.outbox import Outbox
from daemon.service.settings import Settings
from daemon.voices.registry import VoiceRegistry


class MqttCommands:
    def __init__(
        self,
        *,
        settings: Settings,
        intake: JobIntake,
        queue: JobQueue,
        lanes: Sequence[Lane],
        player: Player,
        voices: VoiceRegistry,
        events: EventSink,
        outbox: Outbox,
    ) -> None:
        self.settings = settings
        self.intake = intake
        self.queue = queue
        self.lanes = lanes
        self.player = player
        self.voices = voices
        self.events = events
        self.outbox = outbox

    def handlers(self) -> dict[str, Callable[[bytes], None]]:
        return {
            "say": self.on_say,
            "stop": self.on_stop,
            "volume": self.on_volume,
            "pause": self.on_pause,
            "voice": self.on_voice,
        }

    def on_say(self, payload: bytes) -> None:
        config = self.settings.config
        try:
            command = parse_say(payload, config.queue.max_payload_bytes)
            check_reply_topic(command, config.mqtt.base_topic, config.mqtt.reply_topic_prefixes)
        except CommandError as error:
            self.events.emit(
                "rejected", None, id=error.job_id, reason="invalid", message=str(error)
            )
            return
        self.intake.submit(command)

    def on_stop(self, payload: bytes) -> None:
        command = self._parsed(parse_stop, "stop", payload)
        if command is None:
            return
        if command.id is not None:
            if not self.stop_job(command.id):
                message = f"stop: no job {command.id!r} is playing or queued"
                self.events.emit("rejected", None, reason="invalid", message=message)
            return
        self.stop(everything=command.all)

    def stop_job(self, job_id: str) -> bool:
        """Stops one job, playing or queued; False when there is no such job."""
        queued = self.queue.remove(job_id)
        if queued is not None:
            self.events.emit(
                "interrupted", queued, reason="stopped", message="removed from the queue"
            )
            return True
        playing = [
            lane for lane in self.lanes if lane.current is not None and lane.current.id == job_id
        ]
        for lane in playing:
            lane.interrupt("stopped")
        return bool(playing)

    def stop(self, *, everything: bool) -> None:
        """Stops what is playing (and with `everything`, clears the queue)."""
        if everything:
            for job in self.queue.clear():
                self.events.emit(
                    "interrupted", job, reason="stopped", message="cleared from the queue"
                )
        for lane in self.lanes:
            lane.interrupt("stopped")

    def on_volume(self, payload: bytes) -> None:
        volume = self._parsed(parse_volume, "volume", payload)
        if volume is not None:
            self.set_volume(volume)

    def set_volume(self, volume: float) -> None:
        self.player.volume = volume
        self.publish_volume()

    def on_voice(self, payload: bytes) -> None:
        """Sets the voice of requests that name none (Home Assistant's voice `select`)."""
        name = self._parsed(parse_voice, "voice", payload)
        if name is None:
            return
        try:
            self.voices.require(name)
        except VoiceError as error:
            self.events.emit("rejected", None, reason="invalid", message=f"voice: {error}")
            return
        self.voices.default = name
        self.publish_voice()

    def on_pause(self, payload: bytes) -> None:
        """Pauses what is playing and the queue; jobs keep being accepted."""
        paused = self._parsed(parse_pause, "pause", payload)
        if paused is None:
            return
        self.queue.set_paused(paused)
        self.player.paused = paused
        self.publish_pause()

    def publish_state(self) -> None:
        self.publish_volume()
        self.publish_pause()
        self.publish_voice()

    def publish_volume(self) -> None:
        self.outbox.publish(self.outbox.topic("volume/state"), f"{self.player.volume:g}", True)

    def publish_pause(self) -> None:
        state = "true" if self.queue.paused else "false"
        self.outbox.publish(self.outbox.topic("pause/state"), state, True)

    def publish_voice(self) -> None:
        self.outbox.publish(self.outbox.topic("voice/state"), self.voices.default, True)

    def _parsed(self, parser: Callable[[bytes, int], Any], topic: str, payload: bytes) -> Any:
        """The parsed payload, or None after a `rejected` event naming the problem."""
        try:
            return parser(payload, self.settings.config.queue.max_payload_bytes)
        except CommandError as error:
            self.events.emit("rejected", None, reason="invalid", message=f"{topic}: {error}")
            return None
