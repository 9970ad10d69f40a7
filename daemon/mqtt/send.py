"""`fastvoice send`: the operator's client. Publishes one `say`, follows its events."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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


@dataclass
class Receipt:
    """What one box of a zone did with the job: `played` (finished), `failed`, `rejected`,
    `interrupted`, `offline` (its retained status says so: it was not there to take the job) or
    `no answer` (online, but no final event within the time)."""

    box: str
    outcome: str
    events: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None

    @property
    def played(self) -> bool:
        return self.outcome == "played"

    @property
    def finished_at(self) -> float | None:
        """When its speech ended (the box's clock, unix seconds)."""
        final = self.events[-1] if self.events else {}
        return final.get("time") if final.get("event") == "finished" else None


def send_to_zone(
    config: MqttConfig, zone: str, say: dict[str, Any], lead_s: float, timeout_s: float
) -> list[Receipt]:
    """One `say` for every box of `zone`, with one `at` `lead_s` ahead so that they start
    together; returns a receipt per member (those the zone's retained membership names) and
    publishes them together under `<fleet>/zone/<zone>/receipts`."""
    fleet = _fleet_topic(config)
    job_id = say.setdefault("id", uuid.uuid4().hex[:12])
    try:
        with _connected(config, job_id) as (client, inbox, subscribed):
            client.subscribe(f"{fleet}/zone/{zone}/members/+", 1)
            subscribed.get(timeout=timeout_s)
            members = _members(inbox)
            if not members:
                raise FastvoiceError(f"no box is in zone {zone!r} (none under {fleet}/zone/{zone})")
            topics = [
                (f"{base}/{suffix}", 1) for base in members for suffix in ("events", "status")
            ]
            client.subscribe(topics)
            subscribed.get(timeout=timeout_s)
            say["at"] = round((time.time() + lead_s) * 1000)
            topic = f"{fleet}/zone/{zone}/say"
            client.publish(topic, json.dumps(say), qos=1).wait_for_publish(timeout_s)
            receipts = _receipts(inbox, job_id, members, timeout_s)
            summary = _summary(job_id, zone, receipts)
            client.publish(f"{fleet}/zone/{zone}/receipts", json.dumps(summary), qos=1)
            return receipts
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


def _receipts(inbox, job_id: str, members: list[str], timeout_s: float) -> list[Receipt]:
    """Each member's events up to its final one; a member whose retained status is offline
    (its last will) or stopped is not waited for."""
    events: dict[str, list[dict[str, Any]]] = {base: [] for base in members}
    status: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s

    def waiting() -> list[str]:
        return [
            base
            for base, seen in events.items()
            if (not seen or seen[-1]["event"] not in FINAL_EVENTS)
            and status.get(base) not in ("offline", "stopped")
        ]

    while waiting() and time.monotonic() < deadline:
        try:
            topic, payload = inbox.get(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        except queue.Empty:
            continue
        base, _, kind = topic.rpartition("/")
        if kind == "status" and base in events:
            status[base] = payload.decode(errors="replace")
        elif kind == "events" and base in events and payload:
            event = json.loads(payload)
            if event.get("id") == job_id:
                events[base].append(event)
    return [_receipt(base, events[base], status.get(base)) for base in members]


def _receipt(base: str, events: list[dict[str, Any]], status: str | None) -> Receipt:
    final = events[-1] if events and events[-1]["event"] in FINAL_EVENTS else None
    if final is None:
        outcome = "offline" if status in ("offline", "stopped") else "no answer"
        message = f"its status is {status!r}" if outcome == "offline" else None
        return Receipt(base, outcome, events, message)
    outcome = "played" if final["event"] == "finished" else final["event"]
    return Receipt(base, outcome, events, final.get("message"))


def _summary(job_id: str, zone: str, receipts: list[Receipt]) -> dict[str, Any]:
    """One message for the whole zone job: who played it, who did not and why."""
    return {
        "v": 1,
        "id": job_id,
        "zone": zone,
        "played": [r.box for r in receipts if r.played],
        "not_played": {
            r.box: {"outcome": r.outcome, "message": r.message} for r in receipts if not r.played
        },
    }
