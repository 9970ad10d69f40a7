"""Home Assistant MQTT discovery through a real mosquitto: the documented keys, the entities
working as Home Assistant drives them, republish on its `online`, and removal."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.conftest import run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import Recorder

ENTITIES = {
    "notify": {"say"},
    "number": {"volume"},
    "select": {"voice"},
    "button": {"stop"},
    "sensor": {"queue_depth", "latency"},
}
# Keys Home Assistant's MQTT integration requires or reads for each component.
REQUIRED = {
    "notify": {"command_topic"},
    "number": {"command_topic", "state_topic", "min", "max", "step"},
    "select": {"command_topic", "state_topic", "options"},
    "button": {"command_topic", "payload_press"},
    "sensor": {"state_topic", "value_template"},
}
COMMON = {"unique_id", "default_entity_id", "name", "device", "availability_topic",
          "payload_available", "payload_not_available", "qos"}  # fmt: skip
# Home Assistant's own test of an entity id (homeassistant.core.valid_entity_id); its package
# needs a newer Python than the tests run on, so the rule is written out here.
VALID_ENTITY_ID = re.compile(r"^(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)$")


@pytest.fixture
def box(broker, capture, tmp_path):
    node = f"box{uuid.uuid4().hex[:6]}"  # retained configs of earlier tests stay on the broker
    running = Daemon(
        broker,
        tmp_path,
        capture.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        recorder_options={"also": ("homeassistant/#",)},
        homeassistant={"discovery": True, "node_id": node},
    )
    running.node = node
    yield running
    running.stop()


def configs(daemon: Daemon, after: int = 0) -> dict[str, dict]:
    """Every discovery config seen (from index `after` of the recording), by topic."""
    node = daemon.node
    expected = {
        f"homeassistant/{c}/{node}/{o}/config" for c, objs in ENTITIES.items() for o in objs
    }
    for topic in expected:
        daemon.recorder.wait_for(lambda t, p, topic=topic: t == topic and p, since=after)
    seen = daemon.recorder.seen[after:]
    return {t: json.loads(p) for t, p, _ in seen if t in expected and p}


def test_discovery_configs_carry_the_documented_keys(box):
    found = configs(box)
    assert len(found) == sum(len(objects) for objects in ENTITIES.values())
    unique_ids = [config["unique_id"] for config in found.values()]
    assert len(set(unique_ids)) == len(unique_ids)
    for topic, config in found.items():
        component = topic.split("/")[1]
        assert REQUIRED[component] | COMMON <= set(config), topic
        assert "object_id" not in config, "Home Assistant 2026.4 ignores object_id"
        assert config["default_entity_id"] == f"{component}.{config['unique_id']}"
        assert VALID_ENTITY_ID.match(config["default_entity_id"]), config["default_entity_id"]
        assert config["availability_topic"] == f"{box.base}/status"
        assert config["device"]["identifiers"] == [f"fastvoice_{box.node}"]
    notify = found[f"homeassistant/notify/{box.node}/say/config"]
    assert notify["command_topic"] == f"{box.base}/say"
    voice = found[f"homeassistant/select/{box.node}/voice/config"]
    assert voice["options"] == ["en_US-joe-medium"]
    late = Recorder(box.port, box.base, also=("homeassistant/#",))  # sees what was retained
    try:
        for topic in found:
            _, _, retained = late.wait_for(lambda t, p, topic=topic: t == topic and p)
            assert retained, topic
    finally:
        late.close()


def test_a_node_id_of_any_case_gives_valid_entity_ids():
    from daemon.adapters.homeassistant import discovery_configs
    from daemon.config import parse_config

    config = parse_config({"homeassistant": {"discovery": True, "node_id": "Lobby-Box--2_"}})
    found = discovery_configs(config, ["en_US-joe-medium"])
    ids = {topic.split("/")[-2]: payload["default_entity_id"] for topic, payload in found.items()}
    assert ids["say"] == "notify.fastvoice_lobby_box_2_say"
    assert all(VALID_ENTITY_ID.match(entity_id) for entity_id in ids.values()), ids


def test_entities_work_as_home_assistant_drives_them(box):
    found = configs(box)
    notify = found[f"homeassistant/notify/{box.node}/say/config"]
    box.recorder.publish_to(notify["command_topic"], "The dryer is done.")
    box.recorder.event(box.recorder.event(None, "queued")["id"], "finished")

    volume = found[f"homeassistant/number/{box.node}/volume/config"]
    box.recorder.publish_to(volume["command_topic"], "0.35")
    box.recorder.wait_for(lambda t, p: t == volume["state_topic"] and p == b"0.35")

    voice = found[f"homeassistant/select/{box.node}/voice/config"]
    box.recorder.publish_to(voice["command_topic"], "en_US-joe-medium")
    box.recorder.wait_for(lambda t, p: t == voice["state_topic"] and p == b"en_US-joe-medium")
    box.recorder.publish_to(voice["command_topic"], "nobody")
    rejected = box.recorder.event(None, "rejected")
    assert "unknown voice 'nobody'" in rejected["message"]

    stop = found[f"homeassistant/button/{box.node}/stop/config"]
    job = say(box, text=" ".join(["This announcement goes on and on."] * 30))
    box.recorder.event(job, "started")
    box.recorder.publish_to(stop["command_topic"], stop["payload_press"])
    assert box.recorder.event(job, "interrupted")["reason"] == "stopped"

    queue = found[f"homeassistant/sensor/{box.node}/queue_depth/config"]
    _, stats, _ = box.recorder.wait_for(lambda t, p: t == queue["state_topic"])
    assert "queue_depth" in json.loads(stats) and "latency_p50_s" in json.loads(stats)


def test_configs_are_published_again_when_home_assistant_comes_online(box):
    configs(box)
    mark = len(box.recorder.seen)
    box.recorder.publish_to("homeassistant/status", "online")
    again = configs(box, after=mark)
    assert len(again) == sum(len(objects) for objects in ENTITIES.values())


def test_unregister_empties_every_config(box):
    found = configs(box)
    mark = len(box.recorder.seen)
    result = run_cli("serve", "--unregister", "--config", str(box.config_path))
    assert result.returncode == 0, result.stderr
    assert f"removed {len(found)}" in result.stdout.decode()
    for topic in found:
        box.recorder.wait_for(lambda t, p, topic=topic: t == topic and p == b"", since=mark)
    emptied = {t for t, p, _ in box.recorder.seen[mark:] if t in found and p == b""}
    assert emptied == set(found)
