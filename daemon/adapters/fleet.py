"""Zones and the fleet: a box also takes `say` and `stop` sent to the whole fleet
(`<fleet_topic>/all/say`) and to the zones it belongs to (`<fleet_topic>/zone/<zone>/say`), so
one message reaches every box of a zone; events stay under each box's own base topic. Each box
announces its membership retained (`<fleet_topic>/zone/<zone>/members/<box>`) and withdraws it
when it stops; a box that dies keeps its entry until it comes back (its `status` says offline).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from daemon.config import MqttConfig

Publish = Callable[..., None]  # (topic, payload, retain=...)
FLEET_COMMANDS = ("say", "stop")


def box_name(base_topic: str, fleet_topic: str | None) -> str:
    """A box's name in the fleet: its base topic below the fleet topic."""
    return base_topic.removeprefix(f"{fleet_topic}/").replace("/", "_")


class Fleet:
    def __init__(
        self, config: MqttConfig, handlers: dict[str, Callable[[bytes], None]], publish: Publish
    ) -> None:
        self.topic = config.fleet
        self.zones = list(config.zones)
        self.base = config.base_topic
        self.handlers = handlers
        self.publish = publish

    @property
    def box(self) -> str:
        return box_name(self.base, self.topic)

    def subscriptions(self) -> dict[str, Callable[[str, bytes], None]]:
        """`say` and `stop` of the fleet and of each zone, handled as the box's own."""
        if self.topic is None:
            return {}
        scopes = ["all", *(f"zone/{zone}" for zone in self.zones)]
        return {
            f"{self.topic}/{scope}/{command}": self._handler(command)
            for scope in scopes
            for command in FLEET_COMMANDS
        }

    def _handler(self, command: str) -> Callable[[str, bytes], None]:
        handle = self.handlers[command]
        return lambda _topic, payload: handle(payload)

    def announce(self) -> None:
        for zone in self.zones if self.topic is not None else ():
            member = {"base_topic": self.base, "zones": self.zones}
            self.publish(self._member_topic(zone), json.dumps(member), retain=True)

    def withdraw(self) -> None:
        for zone in self.zones if self.topic is not None else ():
            self.publish(self._member_topic(zone), b"", retain=True)

    def _member_topic(self, zone: str) -> str:
        return f"{self.topic}/zone/{zone}/members/{self.box}"

    def as_dict(self) -> dict:
        """For `status/info`."""
        return {"topic": self.topic, "zones": self.zones, "box": self.box}
