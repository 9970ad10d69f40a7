"""`fastvoice send`: the operator's client. Publishes one `say`, follows its events."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daemon.config import MqttConfig
from daemon.errors import FastvoiceError
from daemon.mqtt.broker import connect_once, make_client

FINAL_EVENTS = {"finished", "failed", "rejected", "interrupted"}


@contextmanager
def _connected(config: MqttConfig, job_id: str) -> Iterator[tuple[Any, queue.Queue, queue.Queue]]:
    """A client of this job's own, connected: messages go into the inbox, each subscription's
    acknowledgement into `subscribed`."""
    inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()
    subscribed: queue.Queue[bool] = queue.Queue()
    client = make_client(config, f"fastvoice-send-{job_id}", persistent=False)
    client.on_message = lambda _c, _u, message: inbox.put((message.topic, message.payload))
    client.on_subscribe = lambda *_: subscribed.put(True)
    connect_once(client, config)
    try:
        yield client, inbox, subscribed
    finally:
        client.loop_stop()
        client.disconnect()


def send(
    config: MqttConfig, say: dict[str, Any], timeout_s: float, save: Path | None = None
) -> tuple[list[dict[str, Any]], bytes | None]:
    """Returns the job's events up to its final one, and the published WAV when `save` is set."""
    job_id = say.setdefault("id", uuid.uuid4().hex[:12])
    base = config.base_topic
    reply_topic = f"{base}/reply/{job_id}"
    if save is not None:
        say.update(output="publish", reply_topic=reply_topic, format="wav")
    try:
        with _connected(config, job_id) as (client, inbox, subscribed):
            client.subscribe([(f"{base}/events", 1), (reply_topic, 1)])
            subscribed.get(timeout=timeout_s)
            client.publish(f"{base}/say", json.dumps(say), qos=1).wait_for_publish(timeout_s)
            return _follow(inbox, job_id, reply_topic, timeout_s, want_audio=save is not None)
    except queue.Empty:
        raise FastvoiceError(
            f"no answer from {base} within {timeout_s:g} s; is it running?"
        ) from None


def _follow(inbox, job_id: str, reply_topic: str, timeout_s: float, want_audio: bool):
    events: list[dict[str, Any]] = []
    audio: bytes | None = None
    while not events or events[-1]["event"] not in FINAL_EVENTS or (want_audio and audio is None):
        topic, payload = inbox.get(timeout=timeout_s)
        if topic == reply_topic:
            audio = payload
            continue
        event = json.loads(payload)
        if event.get("id") == job_id:
            events.append(event)
            if event["event"] != "finished" and event["event"] in FINAL_EVENTS:
                break
    return events, audio


def send_to_zone(
    config: MqttConfig, zone: str, say: dict[str, Any], lead_s: float, timeout_s: float
) -> dict[str, list[dict[str, Any]]]:
    """One `say` for every box of `zone`, with one `at` `lead_s` ahead so that they start
    together; returns each member's events (by its base topic) up to its final one. The
    members are those the zone's retained membership names."""
    fleet = _fleet_topic(config)
    job_id = say.setdefault("id", uuid.uuid4().hex[:12])
    try:
        with _connected(config, job_id) as (client, inbox, subscribed):
            client.subscribe(f"{fleet}/zone/{zone}/members/+", 1)
            subscribed.get(timeout=timeout_s)
            members = _members(inbox)
            if not members:
                raise FastvoiceError(f"no box is in zone {zone!r} (none under {fleet}/zone/{zone})")
            client.subscribe([(f"{base}/events", 1) for base in members])
            subscribed.get(timeout=timeout_s)
            say["at"] = round((time.time() + lead_s) * 1000)
            topic = f"{fleet}/zone/{zone}/say"
            client.publish(topic, json.dumps(say), qos=1).wait_for_publish(timeout_s)
            return _follow_members(inbox, job_id, members, timeout_s)
    except queue.Empty:
        raise FastvoiceError(f"no answer from zone {zone!r} within {timeout_s:g} s") from None


def send_to_render(
    config: MqttConfig, say: dict[str, Any], timeout_s: float
) -> tuple[list[dict[str, Any]], bytes | None]:
    """One job for the fleet's shared render queue, answered under the fleet topic; returns the
    job's claims as they changed (who took it, who did it and how) and its WAV."""
    fleet = _fleet_topic(config)
    job_id = say.setdefault("id", uuid.uuid4().hex[:12])
    reply_topic = f"{fleet}/render/reply/{job_id}"
    say.update(output="publish", reply_topic=reply_topic, format="wav")
    claims: list[dict[str, Any]] = []
    audio = None
    try:
        with _connected(config, job_id) as (client, inbox, subscribed):
            client.subscribe([(f"{fleet}/render/claims/{job_id}", 1), (reply_topic, 1)])
            subscribed.get(timeout=timeout_s)
            client.publish(f"{fleet}/render/say", json.dumps(say), qos=1).wait_for_publish(
                timeout_s
            )
            deadline = time.monotonic() + timeout_s
            while (
                not claims
                or not claims[-1].get("done")
                or (claims[-1].get("outcome") == "finished" and audio is None)
            ):
                topic, payload = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
                if topic == reply_topic:
                    audio = payload
                elif payload:
                    claims.append(json.loads(payload))
            return claims, audio
    except queue.Empty:
        raise FastvoiceError(
            f"no box of {fleet}/render answered within {timeout_s:g} s; does one have "
            "mqtt.render_group set?"
        ) from None


def _fleet_topic(config: MqttConfig) -> str:
    if config.fleet is None:
        raise FastvoiceError("no fleet topic: mqtt.base_topic has no parent, set mqtt.fleet_topic")
    return config.fleet


def _members(inbox, quiet_s: float = 0.5) -> list[str]:
    """The base topics of the retained members that arrive until `quiet_s` passes without one."""
    members = []
    while True:
        try:
            _, payload = inbox.get(timeout=quiet_s)
        except queue.Empty:
            return members
        if payload:
            members.append(json.loads(payload)["base_topic"])


def _follow_members(inbox, job_id: str, members: list[str], timeout_s: float):
    events: dict[str, list[dict[str, Any]]] = {base: [] for base in members}
    deadline = time.monotonic() + timeout_s
    while any(not e or e[-1]["event"] not in FINAL_EVENTS for e in events.values()):
        topic, payload = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        event = json.loads(payload) if payload else {}
        base = topic.removesuffix("/events")
        if event.get("id") == job_id and base in events:
            events[base].append(event)
    return events
