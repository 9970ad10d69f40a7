"""Where the service's messages go: the broker, except a local client's audio, which goes back
over its socket. Parts publish here, never to the broker connection itself."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.adapters.local_server import LocalServer
    from daemon.mqtt.broker import MqttLink


class Outbox:
    def __init__(self, base_topic: str, local: LocalServer | None = None) -> None:
        self.base_topic = base_topic
        self.local = local
        self.link: MqttLink | None = None  # connected by the composition root, once built

    def topic(self, suffix: str) -> str:
        return f"{self.base_topic}/{suffix}"

    def publish(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        if self.local is not None and self.local.deliver(topic, payload):
            return
        assert self.link is not None, "the broker link is attached before anything runs"
        self.link.publish(topic, payload, retain)

    def publish_json(self, suffix: str, data: dict[str, Any], retain: bool = False) -> None:
        self.publish(self.topic(suffix), json.dumps(data, separators=(",", ":")), retain)
