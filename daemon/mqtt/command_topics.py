"""The commands under the base topic (`say`, `stop`, `volume`, `pause`, `voice`): parsed on
paho's thread and handed to the front door (nothing slow); the state topics published retained
whenever the box's state changes, whichever interface changed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.errors import VoiceError
from daemon.service.commands import (
    CommandError,
    check_reply_topic,
    parse_pause,
    parse_say,
    parse_stop,
    parse_voice,
    parse_volume,
)
from daemon.service.front_door import FrontDoor
from daemon.service.outbox import Outbox


class MqttCommands:
    def __init__(self, door: FrontDoor, outbox: Outbox) -> None:
        self.door = door
        self.outbox = outbox
        door.state_listeners.append(self.publish)

    def handlers(self) -> dict[str, Callable[[bytes], None]]:
        return {
            "say": self.on_say,
            "stop": self.on_stop,
            "volume": self.on_volume,
            "pause": self.on_pause,
            "voice": self.on_voice,
        }

    def on_say(self, payload: bytes) -> None:
        config = self.door.config
        try:
            command = parse_say(payload, config.queue.max_payload_bytes)
            check_reply_topic(command, config.mqtt.base_topic, config.mqtt.reply_topic_prefixes)
        except CommandError as error:
            self.door.reject(str(error), error.job_id)
            return
        self.door.submit(command)

    def on_stop(self, payload: bytes) -> None:
        command = self._parsed(parse_stop, "stop", payload)
        if command is None:
            return
        if command.id is None:
            self.door.stop(everything=command.all)
        elif not self.door.stop_job(command.id):
            self.door.reject(f"stop: no job {command.id!r} is playing or queued")

    def on_volume(self, payload: bytes) -> None:
        volume = self._parsed(parse_volume, "volume", payload)
        if volume is not None:
            self.door.set_volume(volume)

    def on_voice(self, payload: bytes) -> None:
        """Sets the voice of requests that name none (Home Assistant's voice `select`)."""
        name = self._parsed(parse_voice, "voice", payload)
        if name is None:
            return
        try:
            self.door.set_default_voice(name)
        except VoiceError as error:
            self.door.reject(f"voice: {error}")

    def on_pause(self, payload: bytes) -> None:
        paused = self._parsed(parse_pause, "pause", payload)
        if paused is not None:
            self.door.set_paused(paused)

    def publish_state(self) -> None:
        for part in ("volume", "pause", "voice"):
            self.publish(part)

    def publish(self, part: str) -> None:
        """The retained state topic of `part` ("volume", "pause" or "voice")."""
        door = self.door
        state = {
            "volume": lambda: f"{door.volume:g}",
            "pause": lambda: "true" if door.paused else "false",
            "voice": lambda: door.default_voice,
        }
        self.outbox.publish(self.outbox.topic(f"{part}/state"), state[part](), True)

    def _parsed(self, parser: Callable[[bytes, int], Any], topic: str, payload: bytes) -> Any:
        """The parsed payload, or None after a `rejected` event naming the problem."""
        try:
            return parser(payload, self.door.config.queue.max_payload_bytes)
        except CommandError as error:
            self.door.reject(f"{topic}: {error}")
            return None
