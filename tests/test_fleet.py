"""Zones and the fleet topic: two services on one real broker, addressed together and apart."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import run_cli
from tests.daemon_helpers import fleet_box
from tests.mqtt_helpers import Recorder


@pytest.fixture
def fleet(broker, alsa, tmp_path):
    """Boxes `a` (zone lobby) and `b` (zones lobby and floor-2) of one fleet, each playing on a
    capture device of its own, and a recorder of the fleet's topics."""
    topic = f"fleet-{uuid.uuid4().hex[:6]}"
    boxes = {
        name: fleet_box(broker, alsa.env(), tmp_path / name, topic, name, zones=zones)
        for name, zones in (("a", ["lobby"]), ("b", ["lobby", "floor-2"]))
    }
    watcher = Recorder(broker.port, topic, client_id=None)
    yield topic, boxes, watcher
    watcher.close()
    for box in boxes.values():
        box.stop()


def send(watcher: Recorder, topic: str, **fields) -> str:
    fields.setdefault("id", uuid.uuid4().hex[:10])
    watcher.publish_to(topic, json.dumps(fields))
    return fields["id"]


def test_a_zone_reaches_its_members_and_all_reaches_every_box(fleet):
    topic, boxes, watcher = fleet
    both = send(watcher, f"{topic}/zone/lobby/say", text="The lobby closes at six.")
    only_b = send(watcher, f"{topic}/zone/floor-2/say", text="Floor two is closed.")
    everyone = send(watcher, f"{topic}/all/say", text="Good evening.")
    for box in boxes.values():
        box.recorder.event(both, "finished")
        box.recorder.event(everyone, "finished")
    boxes["b"].recorder.event(only_b, "finished")
    # `a` took its jobs in arrival order: had the floor-2 job reached it, it would be there.
    assert boxes["a"].recorder.events(only_b) == []


def test_a_zone_stop_ends_a_members_job(fleet):
    topic, boxes, watcher = fleet
    box = boxes["b"]
    box.recorder.publish("pause", b"true")
    job = send(watcher, f"{topic}/zone/floor-2/say", text="Waiting on floor two.")
    box.recorder.event(job, "queued")
    watcher.publish_to(f"{topic}/zone/floor-2/stop", json.dumps({"id": job}))
    assert box.recorder.event(job, "interrupted")["reason"] == "stopped"
    box.recorder.publish("pause", b"false")


def test_members_are_announced_retained_shown_in_status_and_withdrawn_at_stop(fleet, broker):
    topic, boxes, _ = fleet
    members = Recorder(broker.port, f"{topic}/zone", client_id=None)
    announced = [("lobby", "a"), ("lobby", "b"), ("floor-2", "b")]
    try:
        for zone, box in announced:  # live or already retained, as the boxes came up
            member = f"{topic}/zone/{zone}/members/{box}"
            _, payload, _ = members.wait_for(lambda t, p, m=member: t == m and p != b"")
            assert json.loads(payload)["base_topic"] == f"{topic}/{box}"
        # Retained: a client that comes later is told at once.
        later = Recorder(broker.port, f"{topic}/zone", client_id=None)
        try:
            for zone, box in announced:
                member = f"{topic}/zone/{zone}/members/{box}"
                _, _, retained = later.wait_for(lambda t, p, m=member: t == m and p != b"")
                assert retained
        finally:
            later.close()
        b = boxes["b"]
        _, info, _ = b.recorder.wait_for(lambda t, p: t == f"{b.base}/status/info")
        assert json.loads(info)["fleet"] == {
            "topic": topic,
            "zones": ["lobby", "floor-2"],
            "box": "b",
        }
        since = len(members.seen)
        b.stop()
        member = f"{topic}/zone/floor-2/members/b"
        members.wait_for(lambda t, p: t == member and p == b"", since=since)
    finally:
        members.close()


def test_send_to_a_zone_starts_its_members_together_and_follows_each(fleet, broker, tmp_path):
    topic, boxes, _ = fleet
    config = tmp_path / "operator.yaml"
    mqtt = {"port": broker.port, "base_topic": f"{topic}/operator"}
    config.write_text(json.dumps({"mqtt": mqtt}))
    result = run_cli("send", "Lobby and floor two.", "--zone", "lobby", "--id", "z-1",
                     "--config", str(config))  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    for name in boxes:
        kinds = [line.split()[1] for line in lines if line.startswith(f"{topic}/{name} ")]
        assert kinds == ["queued", "started", "finished"], lines
        assert "late" not in boxes[name].recorder.events("z-1")  # both made the one `at`
    nobody = run_cli("send", "Hello?", "--zone", "attic", "--config", str(config))
    assert nobody.returncode != 0 and b"no box is in zone 'attic'" in nobody.stderr


def test_a_zone_job_gets_a_receipt_per_box_names_the_offline_one_and_falls_back(
    fleet, broker, tmp_path
):
    """Box `a` dies (its last will says offline, its membership stays): a job for the lobby is
    not waited for there, the receipts and the zone's summary name `a` as offline, and the job
    goes to the fallback zone, floor-2, where `b` plays it again."""
    topic, boxes, watcher = fleet
    boxes["a"].process.kill()
    boxes["a"].process.wait(10)
    watcher.wait_for(lambda t, p: t == f"{topic}/a/status" and p == b"offline")
    config = tmp_path / "operator.yaml"
    mqtt = {"port": broker.port, "base_topic": f"{topic}/operator"}
    config.write_text(json.dumps({"mqtt": mqtt}))
    result = run_cli("send", "Lobby, please.", "--zone", "lobby", "--id", "z-2",
                     "--fallback-zone", "floor-2", "--config", str(config))  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert f"receipt {topic}/a  offline: its status is 'offline'" in lines
    assert "zone lobby: 1 of 2 played" in lines and "fallback: zone floor-2" in lines
    assert any(line.startswith(f"receipt {topic}/b  played at ") for line in lines)
    assert "zone floor-2: 1 of 1 played" in lines
    _, payload, _ = watcher.wait_for(lambda t, p: t == f"{topic}/zone/lobby/receipts")
    summary = json.loads(payload)
    assert summary["id"] == "z-2" and summary["played"] == [f"{topic}/b"]
    offline = {"outcome": "offline", "message": "its status is 'offline'"}
    assert summary["not_played"] == {f"{topic}/a": offline}
