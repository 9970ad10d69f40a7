"""Broker sessions of several services on one host: each its own client id by default, and two
that share one (a copied config) are told so instead of taking each other over in silence."""

from __future__ import annotations

import json
import uuid

from daemon.config import parse_config
from daemon.mqtt.broker import MAX_CLIENT_ID, default_client_id
from tests.daemon_helpers import Daemon


def client_id(base_topic: str, **mqtt) -> str:
    return default_client_id(parse_config({"mqtt": {"base_topic": base_topic, **mqtt}}).mqtt)


def test_the_default_client_id_follows_the_base_topic():
    assert client_id("fastvoice/kitchen") == "fastvoice-kitchen"
    assert client_id("fastvoice/kitchen") != client_id("fastvoice/kitchen-2")
    assert client_id("site/hall", client_id="mine") == "mine"
    long_ones = {client_id("a/" + "x" * 100 + str(n)) for n in range(3)}
    assert len(long_ones) == 3 and all(len(c) <= MAX_CLIENT_ID for c in long_ones)


def test_two_services_on_one_host_both_come_online(broker, alsa, tmp_path):
    """No client id in either config: their base topics keep their sessions apart."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Daemon(broker, tmp_path / "a", alsa.env())
    try:
        second = Daemon(broker, tmp_path / "b", alsa.env())
        try:
            for box in (first, second):
                info = box.recorder.wait_for(lambda t, p, b=box: t == f"{b.base}/status/info")
                assert json.loads(info[1])["mqtt_problem"] is None
            assert not first.log_says("disconnected from the broker", timeout=3)
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_shared_client_id_is_named_in_the_log_and_status(broker, alsa, tmp_path):
    shared = {"client_id": f"copied-{uuid.uuid4().hex[:6]}"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Daemon(broker, tmp_path / "a", alsa.env(), mqtt=shared)
    try:
        second = Daemon(broker, tmp_path / "b", alsa.env(), mqtt=shared, wait_online=False)
        try:
            assert first.log_says("uses the same id", timeout=90) or second.log_says(
                "uses the same id", timeout=5
            )
            problem = first.recorder.wait_for(
                lambda t, p: t.endswith("/status/info") and b"uses the same id" in p, timeout=90
            )
            assert shared["client_id"] in json.loads(problem[1])["mqtt_problem"]
        finally:
            second.stop()
    finally:
        first.stop()


def test_what_waits_for_the_broker_goes_in_order_and_is_bounded(broker, monkeypatch):
    """Published before the broker accepted the service, events wait and go first, in order;
    a broker away for good (a box used over HTTP only) does not grow memory: the newest stay."""
    from daemon.mqtt import broker as mqtt_broker
    from tests.mqtt_helpers import Recorder

    monkeypatch.setattr(mqtt_broker, "BACKLOG_MAX", 5)
    base = f"fastvoice/backlog-{uuid.uuid4().hex[:6]}"
    config = parse_config({"mqtt": {"port": broker.port, "base_topic": base}}).mqtt
    link = mqtt_broker.MqttLink(config)
    link.route({"say": lambda _payload: None})
    recorder = Recorder(broker.port, base)
    try:
        assert recorder.connected.wait(30)
        recorder.subscribe(f"{base}/#")
        for number in range(8):  # not connected yet: kept, the 3 oldest let go
            link.publish(link.topic("events"), json.dumps({"n": number}))
        link.start()
        recorder.wait_for(lambda topic, payload: payload == b'{"n": 7}', timeout=30)
        link.publish(link.topic("events"), json.dumps({"n": 8}))
        recorder.wait_for(lambda topic, payload: payload == b'{"n": 8}', timeout=30)
        numbers = [
            json.loads(payload)["n"]
            for topic, payload, _ in recorder.drain()
            if topic == f"{base}/events"
        ]
        assert numbers == [3, 4, 5, 6, 7, 8]
    finally:
        link.stop()
        recorder.close()
