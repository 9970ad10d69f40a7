"""A real mosquitto broker and a recording client for service tests."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Broker:
    port: int
    process: subprocess.Popen
    config: Path

    @classmethod
    def start(
        cls, directory: Path, persistent: bool = False, port: int | None = None, extra: str = ""
    ) -> Broker:
        """A mosquitto of our own; `persistent` keeps sessions and queued messages over restarts.
        A per-client queue of a million: mosquitto's default (1000 QoS 1 messages beyond those in
        flight) drops messages for a test's recorder that falls behind a burst (the soak test's
        thousands of events), and a test must see every event the service sent."""
        port = port or free_port()
        config = directory / "mosquitto.conf"
        persistence = (
            f"persistence true\npersistence_location {directory}/\n"
            if persistent
            else "persistence false\n"
        )
        config.write_text(
            f"listener {port} 127.0.0.1\n{persistence}"
            f"log_dest stdout\nmessage_size_limit 0\nmax_queued_messages 1000000\nuser root\n"
            f"{extra or 'allow_anonymous true'}\n"
        )
        process = subprocess.Popen(
            ["mosquitto", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return cls(port, process, config)
            time.sleep(0.05)
        process.kill()
        raise RuntimeError("mosquitto did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def restart(self) -> Broker:
        self.stop()
        return Broker.start(self.config.parent, persistent=True, port=self.port)


class Recorder:
    """Subscribes to a base topic and keeps every message, in arrival order."""

    def __init__(
        self,
        port: int,
        base: str,
        client_id: str | None = None,
        configure: Callable[[mqtt.Client], None] | None = None,
        host: str = "127.0.0.1",
        also: tuple[str, ...] = (),
    ) -> None:
        """With a `client_id`, the session persists: messages wait for it over a reconnect.

        `configure` sets credentials or TLS on the client before it connects; `also` are more
        topic filters to record (a peer protocol's topics outside the base topic).
        """
        self.base = base
        self.messages: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.seen: list[tuple[str, bytes, bool]] = []
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=client_id or "", clean_session=client_id is None
        )
        self.client.reconnect_delay_set(min_delay=1, max_delay=2)
        self.connected = threading.Event()
        self.client.on_connect = lambda *_: self.connected.set()
        self.client.on_disconnect = lambda *_: self.connected.clear()
        self.client.on_message = lambda _c, _u, m: self.messages.put((m.topic, m.payload, m.retain))
        if configure is not None:
            configure(self.client)
        self.client.connect(host, port)
        self.client.subscribe([(f"{base}/#", 1), *((topic, 1) for topic in also)])
        self.client.loop_start()

    def subscribe(self, topic_filter: str) -> None:
        """Subscribes to one more filter, returning once the broker has acknowledged it."""
        acked: queue.Queue = queue.Queue()
        self.client.on_subscribe = lambda _c, _u, mid, codes, _p: acked.put(mid)
        _, mid = self.client.subscribe(topic_filter, 1)
        while True:
            acked_mid = acked.get(timeout=30)
            if acked_mid == mid:
                return

    def publish(self, suffix: str, payload: bytes | str) -> None:
        self.publish_to(f"{self.base}/{suffix}", payload)

    def publish_to(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        if not self.connected.wait(30):
            raise TimeoutError("the recorder could not reconnect")
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)

    def wait_for(self, predicate, timeout: float = 60, since: int = 0) -> tuple[str, bytes, bool]:
        """The first message (seen earlier, from index `since`, or arriving) that satisfies
        predicate(topic, payload)."""
        for item in self.seen[since:]:
            if predicate(item[0], item[1]):
                return item
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no matching message arrived")
            try:
                item = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(item)
            if predicate(item[0], item[1]):
                return item

    def drain(self) -> list[tuple[str, bytes, bool]]:
        """Every message seen so far, including those that arrived since the last wait."""
        while True:
            try:
                self.seen.append(self.messages.get_nowait())
            except queue.Empty:
                return self.seen

    def event(self, job_id: str | None, kind: str, timeout: float = 60) -> dict[str, Any]:
        def matches(topic: str, payload: bytes) -> bool:
            if topic != f"{self.base}/events":
                return False
            data = json.loads(payload)
            return data["event"] == kind and (job_id is None or data["id"] == job_id)

        return json.loads(self.wait_for(matches, timeout)[1])

    def events(self, job_id: str) -> list[str]:
        return [
            json.loads(p)["event"]
            for t, p, _ in self.seen
            if t == f"{self.base}/events" and json.loads(p)["id"] == job_id
        ]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
