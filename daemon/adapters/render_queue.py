"""The fleet's shared render queue: publish-only `say` jobs sent to `<fleet_topic>/render/say`
are taken by one box of a render group (an MQTT 5 shared subscription,
`$share/<group>/<fleet_topic>/render/say`) and answered on their `reply_topic`, anywhere under
the fleet topic (a thin speaker's own topic).

Each job is done once, also when a box dies with jobs in hand. The broker cannot be relied on
for that: mosquitto hands a shared subscription's messages round robin and drops what a dead
client had not acknowledged. So the boxes keep the record themselves, retained on the broker:
- `<fleet>/render/workers/<box>`: a box of the group is alive (its last will clears it);
- `<fleet>/render/claims/<id>`: the box that holds a job, with the job, written before the job
  is acknowledged; when the job ends it becomes a `done` marker that expires after an hour.
When a box's presence is cleared, the first of the live boxes (by name) publishes each job the
dead box still held to the queue again, claimed by itself as `requeued` until another box
takes it; a box that restarts does the same with claims of its own it no longer holds.
A copy of a job that is done, or held by a live box, is dropped. Left open: a box that dies
between publishing its answer and marking the job done (milliseconds) is answered twice, and
one that dies between the broker's delivery and its claim loses that job.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from typing import Any

from daemon.adapters.fleet import box_name
from daemon.config import MqttConfig
from daemon.events import ENDS
from daemon.mqtt.broker import default_client_id, make_client
from daemon.service.commands import CommandError, SayCommand, parse_say
from daemon.service.front_door import FrontDoor

log = logging.getLogger(__name__)

DONE_EXPIRY_S = 3600  # how long a done marker keeps a late copy of its job from running again
QOS = 1


class RenderQueue:
    def __init__(self, door: FrontDoor) -> None:
        config = door.config.mqtt
        assert config.render_group is not None and config.fleet is not None
        self.door = door
        self.group = config.render_group
        self.topic = f"{config.fleet}/render"
        self.box = box_name(config.base_topic, config.fleet)
        self.live: set[str] = set()
        self.claims: dict[str, dict[str, Any]] = {}
        self.held: set[str] = set()  # claimed by this box and not yet ended
        self.handed: set[str] = set()  # published again by this box, not yet taken
        self._done_at: dict[str, float] = {}  # when a done marker was seen: forgotten as it expires
        self._lock = threading.RLock()
        self._network_thread: int | None = None
        self._stopping = False
        self._subscribing: dict[int, str] = {}
        client_id = f"{default_client_id(config)}-render"
        self.client = make_client(config, client_id, persistent=False, mqtt5=True)
        self.client.will_set(self._presence_topic(), b"", qos=QOS, retain=True)
        # Claims go out from paho's thread at once; the slower checks and queueing (text
        # preparation) happen here, so that a burst of deliveries is claimed within
        # milliseconds: what a box dies holding unclaimed is lost.
        self._taken: queue.Queue[SayCommand | None] = queue.Queue()
        self._submitter = threading.Thread(target=self._submit, name="render-intake", daemon=True)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.message_callback_add(f"{self.topic}/workers/+", self._on_presence)
        self.client.message_callback_add(f"{self.topic}/claims/+", self._on_claim)
        self.client.message_callback_add(f"{self.topic}/say", self._on_job)

    def start(self, mqtt: MqttConfig) -> None:
        self._submitter.start()
        self.client.connect_async(mqtt.host, mqtt.port, mqtt.keepalive_s, clean_start=True)
        self.client.loop_start()

    def _submit(self) -> None:
        while (command := self._taken.get()) is not None:
            self.door.submit(command, durable=False)

    def stop(self) -> None:
        """Leaves the group: the jobs still held are handed to the others by their sweep."""
        with self._lock:
            self._stopping = True
        if self.client.is_connected():
            self.client.publish(self._presence_topic(), b"", qos=QOS, retain=True).wait_for_publish(
                5
            )
        self.client.disconnect()
        self.client.loop_stop()
        self._taken.put(None)

    def _presence_topic(self) -> str:
        return f"{self.topic}/workers/{self.box}"

    def _claim_topic(self, job_id: str) -> str:
        return f"{self.topic}/claims/{job_id}"

    # The order matters: every box's presence (retained) first, then the claims (retained), so
    # that a claim is never judged before its holder's presence is known; then the queue, and
    # this box's presence once it takes jobs (before any claim of its own, on one connection).
    def _on_connect(self, _client, _userdata, _flags, reason_code, _properties) -> None:
        if reason_code.is_failure:
            log.error("render queue: the broker refused the connection: %s", reason_code)
            return
        self._network_thread = threading.get_ident()
        with self._lock:  # what changed while away comes again, retained
            self.live.clear()
            self.claims.clear()
            self._done_at.clear()
        self._subscribe(f"{self.topic}/workers/+")

    def _subscribe(self, topic_filter: str) -> None:
        _result, mid = self.client.subscribe(topic_filter, qos=QOS)
        self._subscribing[mid] = topic_filter

    def _on_subscribe(self, client, _userdata, mid, _reason_codes, _properties) -> None:
        done = self._subscribing.pop(mid, "")
        if done.endswith("/workers/+"):
            self._subscribe(f"{self.topic}/claims/+")
        elif done.endswith("/claims/+"):
            self._subscribe(f"$share/{self.group}/{self.topic}/say")
        elif done.startswith("$share/"):
            presence = json.dumps({"group": self.group})
            client.publish(self._presence_topic(), presence, qos=QOS, retain=True)

    def _on_presence(self, _client, _userdata, message) -> None:
        box = message.topic.rsplit("/", 1)[1]
        with self._lock:
            if message.payload:
                self.live.add(box)
            else:
                self.live.discard(box)
            self._sweep()

    def _on_claim(self, _client, _userdata, message) -> None:
        job_id = message.topic.rsplit("/", 1)[1]
        try:
            claim = json.loads(message.payload) if message.payload else None
        except ValueError:
            claim = None
        with self._lock:
            if isinstance(claim, dict) and self._own_echo(job_id, claim):
                return
            if isinstance(claim, dict):
                self.claims[job_id] = claim
                self._done_at.pop(job_id, None)
                if claim.get("done"):
                    self._done_at[job_id] = time.monotonic()  # in the order they were seen
                if claim.get("box") != self.box:
                    self.handed.discard(job_id)
            else:
                self.claims.pop(job_id, None)
            self._sweep()

    def _own_echo(self, job_id: str, claim: dict[str, Any]) -> bool:
        """This box's claim of a job it has ended since, coming back from the broker: a job
        refused at once ends before its claim returns, and taken as the claim in force it would
        be queued again as a job this box no longer holds. Its done marker follows it."""
        known = self.claims.get(job_id) or {}
        mine = claim.get("box") == self.box and known.get("box") == self.box
        return mine and not claim.get("done") and bool(known.get("done"))

    def _sweep(self) -> None:
        """Publishes again every job whose holder is gone (when this box is the first live
        one) and every job this box claimed before a restart."""
        self._forget_expired()
        if self._stopping or self.box not in self.live:
            return
        first = min(self.live) == self.box
        for job_id, claim in list(self.claims.items()):
            holder = claim.get("box")
            if claim.get("done") or job_id in self.held or job_id in self.handed:
                continue
            if holder == self.box or (first and holder not in self.live):
                self._requeue(job_id, claim)

    def _forget_expired(self) -> None:
        """Done markers leave the broker after DONE_EXPIRY_S without a word: so here too."""
        expired = time.monotonic() - DONE_EXPIRY_S
        while self._done_at:
            oldest, seen = next(iter(self._done_at.items()))
            if seen >= expired:
                return
            del self._done_at[oldest]
            self.claims.pop(oldest, None)

    def _requeue(self, job_id: str, claim: dict[str, Any]) -> None:
        job = claim.get("job")
        if not isinstance(job, dict):
            return
        log.warning("render queue: job %s was held by %s; queued again", job_id, claim.get("box"))
        self.handed.add(job_id)
        mine = {"box": self.box, "requeued": True, "job": job}
        self.claims[job_id] = mine
        # On one connection, in this order: the claim reaches the broker before the job does.
        self.client.publish(self._claim_topic(job_id), json.dumps(mine), qos=QOS, retain=True)
        self.client.publish(f"{self.topic}/say", json.dumps(job), qos=QOS)

    def _on_job(self, _client, _userdata, message) -> None:
        """A job from the queue: claimed (retained, before paho acknowledges the delivery,
        which it does when this returns), then queued like any `say`, not journalled."""
        try:
            job, command = self._parse(message.payload)
        except CommandError as error:
            self.door.reject(f"render: {error}", error.job_id)
            return
        job_id = job["id"]
        with self._lock:
            if self._stopping or self._taken_elsewhere(job_id):
                log.info("render queue: job %s is done or held elsewhere: dropped", job_id)
                return
            self.held.add(job_id)
            self.handed.discard(job_id)
            claim = {"box": self.box, "job": job}
            self.claims[job_id] = claim
            self.client.publish(self._claim_topic(job_id), json.dumps(claim), qos=QOS, retain=True)
        self._taken.put(command)

    def _taken_elsewhere(self, job_id: str) -> bool:
        claim = self.claims.get(job_id)
        if job_id in self.held:
            return True
        if claim is None or claim.get("requeued"):
            return False
        return bool(claim.get("done")) or claim.get("box") in self.live - {self.box}

    def _parse(self, payload: bytes) -> tuple[dict[str, Any], SayCommand]:
        """The job as a `say` that plays nothing and answers under the fleet topic, with an
        id (given here when it has none, so that every copy of it carries the same)."""
        config = self.door.config
        command = parse_say(payload, config.queue.max_payload_bytes)
        if command.output != "publish":
            raise CommandError(
                f"output: {command.output!r}: a render job plays nothing; send 'publish'",
                command.id,
            )
        fleet = config.mqtt.fleet
        if not command.reply_topic or not command.reply_topic.startswith(f"{fleet}/"):
            raise CommandError(f"reply_topic: must lie under {fleet}/", command.id)
        job = {**json.loads(payload), "id": command.id}
        return job, command

    def on_event(self, message: dict[str, Any]) -> None:
        """The end of a held job marks it done (also when it failed or was refused: it was
        answered as well as it could be; its event says how)."""
        job_id = message.get("id")
        if message.get("event") not in ENDS or message.get("will_resume"):
            return
        with self._lock:
            if job_id not in self.held or self._stopping:
                return
            self.held.discard(job_id)
            done = {"box": self.box, "done": True, "outcome": message["event"]}
            self.claims[job_id] = done
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        properties = Properties(PacketTypes.PUBLISH)
        properties.MessageExpiryInterval = DONE_EXPIRY_S
        sent = self.client.publish(
            self._claim_topic(job_id), json.dumps(done), qos=QOS, retain=True, properties=properties
        )
        if threading.get_ident() != self._network_thread:
            sent.wait_for_publish(5)  # on the broker before the lane takes its next job

    def as_dict(self) -> dict[str, Any]:
        """For `status/info`."""
        with self._lock:
            return {
                "topic": f"{self.topic}/say",
                "group": self.group,
                "box": self.box,
                "connected": self.client.is_connected(),
                "workers": sorted(self.live),
                "holding": sorted(self.held),
            }
