"""Where the service's messages go: the broker, except what a route nearer by takes (a local
client's audio goes back over its socket). Parts publish here, never to the broker itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# Takes a message bound for a topic it serves (True), or leaves it to the broker (False).
Route = Callable[[str, "bytes | str"], bool]
# The broker's publish: topic, payload, retained.
BrokerPublish = Callable[[str, "bytes | str", bool], None]


class Outbox:
    def __init__(self, base_topic: str) -> None:
        self.base_topic = base_topic
        self.routes: list[Route] = []
        self._broker: BrokerPublish | None = None

    def attach(self, broker: BrokerPublish) -> None:
        """The broker link, made after the parts that publish (its handlers are theirs)."""
        self._broker = broker

    def topic(self, suffix: str) -> str:
        return f"{self.base_topic}/{suffix}"

    def publish(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        if any(route(topic, payload) for route in self.routes):
            return
        assert self._broker is not None, "the broker link is attached before anything runs"
        self._broker(topic, payload, retain)

    def publish_json(self, suffix: str, data: dict[str, Any], retain: bool = False) -> None:
        self.publish(self.topic(suffix), json.dumps(data, separators=(",", ":")), retain)
