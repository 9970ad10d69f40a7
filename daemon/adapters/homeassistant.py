"""Home Assistant MQTT discovery: the box appears as a device with its entities.

Retained config messages under `<prefix>/<component>/<node_id>/<object_id>/config` describe a
`notify` entity (its messages are spoken), a `number` for the volume, a `select` for the voice,
a `button` for stop and two `sensor`s from the periodic `stats` message; all share the service's
availability topic. They are republished when Home Assistant announces `online` on
`<prefix>/status`, and removed (empty retained payloads) by `fastvoice serve --unregister`.
Each entity asks for its id with `default_entity_id` (`<component>.<slug>`: Home Assistant
2025.10 deprecated `object_id` for it, and 2026.4 ignores `object_id`).
"""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable
from typing import Any

from daemon import __version__
from daemon.config import Config

log = logging.getLogger(__name__)

Publish = Callable[[str, str, bool], None]  # publish(topic, payload, retain)


def node_id(config: Config) -> str:
    """This box in discovery topics and unique ids: configured, or the host name made safe."""
    configured = config.homeassistant.node_id
    return configured or re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "fastvoice"


# Over 60 lines: a table, one entity's discovery payload per entry.
def discovery_configs(config: Config, voices: list[str]) -> dict[str, dict[str, Any]]:
    """Topic → retained config payload, for every entity of this box (`voices`: the select's
    options, installed voices included)."""
    node, base, prefix = node_id(config), config.mqtt.base_topic, config.homeassistant.prefix
    device = {
        "identifiers": [f"fastvoice_{node}"],
        "name": f"fastvoice {node}",
        "model": "fastvoice",
        "manufacturer": "fastvoice",
        "sw_version": __version__,
    }
    common = {
        "availability_topic": f"{base}/status",
        "payload_available": "online",
        "payload_not_available": "offline",
        "device": device,
        "origin": {"name": "fastvoice", "sw_version": __version__},
        "qos": config.mqtt.qos,
    }
    entities: dict[tuple[str, str], dict[str, Any]] = {
        ("notify", "say"): {"name": "Say", "command_topic": f"{base}/say"},
        ("number", "volume"): {
            "name": "Volume",
            "command_topic": f"{base}/volume",
            "state_topic": f"{base}/volume/state",
            "min": 0,
            "max": 1,
            "step": 0.05,
            "mode": "slider",
        },
        ("select", "voice"): {
            "name": "Voice",
            "command_topic": f"{base}/voice",
            "state_topic": f"{base}/voice/state",
            "options": sorted(voices),
        },
        ("button", "stop"): {"name": "Stop", "command_topic": f"{base}/stop", "payload_press": ""},
        ("sensor", "queue_depth"): {
            "name": "Queue depth",
            "state_topic": f"{base}/stats",
            "value_template": "{{ value_json.queue_depth }}",
            "state_class": "measurement",
        },
        ("sensor", "latency"): {
            "name": "Latency to first audio",
            "state_topic": f"{base}/stats",
            "value_template": "{{ value_json.latency_p50_s }}",
            "unit_of_measurement": "s",
            "device_class": "duration",
            "state_class": "measurement",
        },
    }
    return {
        f"{prefix}/{component}/{node}/{object_id}/config": {
            **fields,
            "unique_id": f"fastvoice_{node}_{object_id}",
            "default_entity_id": f"{component}.{entity_slug(f'fastvoice_{node}_{object_id}')}",
            **common,
        }
        for (component, object_id), fields in entities.items()
    }


def entity_slug(name: str) -> str:
    """The object part of an entity id as Home Assistant accepts it: lower case letters,
    digits and single underscores, none at either end."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]", "_", name.lower())).strip("_") or "fastvoice"


class HomeAssistantDiscovery:
    def __init__(self, config: Config, publish: Publish, voices: Callable[[], list[str]]) -> None:
        """`voices`: the names of the voices at the time of each announcement."""
        self.config = config
        self.publish = publish
        self.voices = voices

    def subscriptions(self) -> dict[str, Callable[[str, bytes], None]]:
        return {f"{self.config.homeassistant.prefix}/status": self._on_homeassistant_status}

    def announce(self) -> None:
        configs = discovery_configs(self.config, self.voices())
        for topic, payload in configs.items():
            self.publish(topic, json.dumps(payload, separators=(",", ":")), True)
        log.info("Home Assistant discovery: %d entities announced", len(configs))

    def _on_homeassistant_status(self, _topic: str, payload: bytes) -> None:
        if payload.strip() == b"online":
            self.announce()


def unregister(config: Config, timeout_s: float = 10.0) -> int:
    """Removes this box's entities from Home Assistant (empty retained configs); the count."""
    from daemon.mqtt.broker import connect_once, make_client

    client = make_client(config.mqtt, f"fastvoice-unregister-{node_id(config)}", persistent=False)
    connect_once(client, config.mqtt)
    try:
        topics = list(discovery_configs(config, []))
        for topic in topics:
            client.publish(topic, b"", qos=1, retain=True).wait_for_publish(timeout_s)
    finally:
        client.disconnect()
        client.loop_stop()
    return len(topics)
