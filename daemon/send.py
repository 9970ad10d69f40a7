"""`fastvoice send`: the operator's client. Publishes one `say`, follows its events."""

from __future__ import annotations

import json
import queue
import uuid
from pathlib import Path
from typing import Any

from daemon.config import MqttConfig
from daemon.errors import FastvoiceError
from daemon.mqtt import connect_once, make_client

FINAL_EVENTS = {"finished", "failed", "rejected", "interrupted"}


def send(
    config: MqttConfig, say: dict[str, Any], timeout_s: float, save: Path | None = None
) -> tuple[list[dict[str, Any]], bytes | None]:
    """Returns the job's events up to its final one, and the published WAV when `save` is set."""
    job_id = say.setdefault("id", uuid.uuid4().hex[:12])
    base = config.base_topic
    reply_topic = f"{base}/reply/{job_id}"
    if save is not None:
        say.update(output="publish", reply_topic=reply_topic, format="wav")
    inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()
    subscribed = queue.Queue()
    client = make_client(config, f"fastvoice-send-{job_id}", persistent=False)
    client.on_message = lambda _c, _u, message: inbox.put((message.topic, message.payload))
    client.on_subscribe = lambda *_: subscribed.put(True)
    connect_once(client, config)
    try:
        client.subscribe([(f"{base}/events", 1), (reply_topic, 1)])
        subscribed.get(timeout=timeout_s)
        client.publish(f"{base}/say", json.dumps(say), qos=1).wait_for_publish(timeout_s)
        return _follow(inbox, job_id, reply_topic, timeout_s, want_audio=save is not None)
    except queue.Empty:
        raise FastvoiceError(
            f"no answer from {base} within {timeout_s:g} s; is it running?"
        ) from None
    finally:
        client.loop_stop()
        client.disconnect()


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
