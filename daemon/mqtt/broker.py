"""The broker connection: subscriptions, retained status with a last will, publishing.

Commands are handed to plain callables by topic suffix; they run on paho's network thread, so
they must only validate and enqueue. Adapters (Hermes, Home Assistant) also subscribe to topics
outside the base topic, by filter (wildcards allowed), with handlers that get the topic too.

Messages leave in the order they were published, across a start or a reconnection: while the
broker has not accepted the connection they wait here, and go first once it has. (paho alone
keeps what is published before its socket opens until the broker's answer, but sends at once
what is published after: a recovered job's `started` could reach the broker before its `queued`.)
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from daemon.config import MqttConfig
from daemon.errors import FastvoiceError

log = logging.getLogger(__name__)

MAX_CLIENT_ID = 64
# A broker that closes a session soon after accepting it, again and again, has another client
# with the same id taking it over (each reconnect takes it back): said once, kept in `problem`.
SHORT_SESSION_S = 20.0
TAKEOVERS = 3
TAKEOVER_WINDOW_S = 120.0
# Messages kept for a broker that is away: a day's stats and status with thousands of job
# events, in a few MB; beyond it the oldest go (the events of jobs long ended).
BACKLOG_MAX = 10_000

Handler = Callable[[bytes], None]
TopicHandler = Callable[[str, bytes], None]


def default_client_id(config: MqttConfig) -> str:
    """`mqtt.client_id`, else one per service: its base topic made safe ("fastvoice/kitchen" →
    "fastvoice-kitchen"; the default base gives "fastvoice-<hostname>"). Two services on one host
    (two sound cards, a test fleet) have two base topics, so they never share a broker session."""
    if config.client_id:
        return config.client_id
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", config.base_topic).strip("-") or "fastvoice"
    if len(safe) > MAX_CLIENT_ID:
        digest = hashlib.sha256(config.base_topic.encode()).hexdigest()[:8]
        safe = f"{safe[: MAX_CLIENT_ID - 9]}-{digest}"
    return safe


def make_client(config: MqttConfig, client_id: str, persistent: bool, mqtt5: bool = False):
    """A paho client with the configured credentials and TLS (server verification on).
    MQTT 5 sessions are chosen at connect (`clean_start`), not here."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    if mqtt5:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id, protocol=mqtt.MQTTv5)
    else:
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=not persistent,
            protocol=mqtt.MQTTv311,
        )
    password = config.password()
    if config.username is not None:
        client.username_pw_set(config.username, password.get_secret_value() if password else None)
    if config.tls is not None:
        client.tls_set(
            ca_certs=str(config.tls.ca_file) if config.tls.ca_file else None,
            certfile=str(config.tls.cert_file) if config.tls.cert_file else None,
            keyfile=str(config.tls.key_file) if config.tls.key_file else None,
        )
    return client


def connect_once(client, config: MqttConfig) -> None:
    """Connects a one-shot client (a CLI command) and starts its network loop; a broker that
    cannot be reached is an error naming it."""
    try:
        client.connect(config.host, config.port, config.keepalive_s)
    except OSError as error:
        raise FastvoiceError(
            f"cannot reach the broker at {config.host}:{config.port}: {error}"
        ) from None
    client.loop_start()


class MqttLink:
    def __init__(self, config: MqttConfig) -> None:
        """Made before the parts that publish; they add their topics (`route`, `subscribe`)
        and what to do on each (re)connection (`online_listeners`) before `start`."""
        self.config = config
        self.base = config.base_topic
        self.handlers: dict[str, Handler] = {}
        self.external: dict[str, TopicHandler] = {}
        self.online_listeners: list[Callable[[], None]] = []
        self.connected = False
        # What was published while not connected (QoS 1 and 2: QoS 0 is dropped, as paho does),
        # sent in order before anything newer; the lock keeps a publish from overtaking it. A box
        # whose broker is gone for good (one used over HTTP or Wyoming only) keeps the newest.
        self._backlog: deque[tuple[str, bytes | str, bool]] = deque(maxlen=BACKLOG_MAX)
        self._publishing = threading.Lock()
        self._dropped = 0  # messages the full backlog let go since the last connection
        self._stopping = False  # a clean stop's disconnect is not a lost connection
        self.client_id = default_client_id(config)
        self.problem: str | None = None
        self._connected_at = 0.0
        self._short_sessions: deque[float] = deque(maxlen=TAKEOVERS)
        self.client = make_client(config, self.client_id, persistent=True)
        self.client.will_set(self.topic("status"), "offline", qos=1, retain=True)
        self.client.reconnect_delay_set(min_delay=1, max_delay=30)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_connect_fail = self._on_connect_fail
        self.client.on_log = self._on_log
        self._last_failure: str | None = None
        self._socket_error: str | None = None
        self.client.on_message = self._on_message

    def route(self, handlers: dict[str, Handler]) -> None:
        """Handlers of topics under the base topic, by suffix (`say`, `voices/install`)."""
        self.handlers.update(handlers)

    def subscribe(self, external: dict[str, TopicHandler]) -> None:
        """Handlers of topics outside the base topic, by filter (wildcards allowed)."""
        self.external.update(external)
        for topic_filter, handler in external.items():
            self.client.message_callback_add(topic_filter, self._external_callback(handler))

    def topic(self, suffix: str) -> str:
        return f"{self.base}/{suffix}"

    def start(self) -> None:
        self.client.connect_async(self.config.host, self.config.port, self.config.keepalive_s)
        self.client.loop_start()

    def stop(self) -> None:
        """Clean exit: retained `stopped`, then disconnect (the will is not sent)."""
        self._stopping = True
        if self.connected:
            self.client.publish(
                self.topic("status"), "stopped", qos=1, retain=True
            ).wait_for_publish(5)
        self.client.disconnect()
        self.client.loop_stop()

    def publish(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        with self._publishing:
            if self.connected:
                self.client.publish(topic, payload, qos=self.config.qos, retain=retain)
            elif self.config.qos > 0:
                if len(self._backlog) == BACKLOG_MAX:
                    self._dropped += 1
                    if self._dropped == 1:
                        log.warning(
                            "no broker: over %d messages wait for it, the oldest are dropped",
                            BACKLOG_MAX,
                        )
                self._backlog.append((topic, payload, retain))

    def _on_connect(self, client, _userdata, _flags, reason_code, _properties) -> None:
        if reason_code.is_failure:
            log.error(
                "broker %s:%d refused the connection: %s",
                self.config.host,
                self.config.port,
                reason_code,
            )
            return
        self._connected_at = time.monotonic()
        self._last_failure = self._socket_error = None
        log.info("connected to %s:%d as %s", self.config.host, self.config.port, self.base)
        topics = [self.topic(suffix) for suffix in self.handlers] + list(self.external)
        client.subscribe([(topic, self.config.qos) for topic in topics])
        client.publish(self.topic("status"), "online", qos=1, retain=True)
        with self._publishing:
            while self._backlog:
                topic, payload, retain = self._backlog.popleft()
                client.publish(topic, payload, qos=self.config.qos, retain=retain)
            if self._dropped:
                log.warning("%d messages were dropped while the broker was away", self._dropped)
            self._dropped = 0
            self.connected = True
        for listener in self.online_listeners:
            try:
                listener()
            except Exception:
                log.exception("a part failed on the broker's (re)connection")

    def _on_connect_fail(self, _client, _userdata) -> None:
        # paho calls this from inside its `except OSError` block: the error is the current one.
        error = sys.exc_info()[1]
        self._report_failure(f"cannot connect to {self.config.host}:{self.config.port}: {error}")

    def _report_failure(self, failure: str) -> None:
        """Logged once while the same failure repeats on every reconnect attempt."""
        if failure != self._last_failure:
            log.error("%s (retrying)", failure)
        self._last_failure = failure

    def _on_log(self, _client, _userdata, level, message: str) -> None:
        """paho reports socket errors (a TLS alert from the broker, ...) only to its log."""
        from paho.mqtt.enums import LogLevel

        if level == LogLevel.MQTT_LOG_ERR:
            self._socket_error = message

    def _on_disconnect(self, _client, _userdata, _flags, reason_code, _properties) -> None:
        with self._publishing:
            was_connected, self.connected = self.connected, False
        if was_connected and self._stopping:
            log.info("disconnected from the broker (the service stops)")
            return
        if was_connected:
            log.warning("disconnected from the broker (%s); reconnecting", reason_code)
            self._note_session_end()
            return
        # Ended before the broker accepted us: a broker that wants a client certificate drops
        # us so, and a frozen one never answers.
        self._report_failure(
            f"the connection to the broker at {self.config.host}:{self.config.port} ended "
            f"before it was accepted: {self._socket_error or reason_code}"
        )

    def _note_session_end(self) -> None:
        now = time.monotonic()
        if now - self._connected_at > SHORT_SESSION_S:
            self._short_sessions.clear()
            self.problem = None
            return
        self._short_sessions.append(now)
        recent = len(self._short_sessions) == TAKEOVERS
        if recent and now - self._short_sessions[0] < TAKEOVER_WINDOW_S and self.problem is None:
            self.problem = (
                f"the broker keeps closing the session of client id {self.client_id!r} soon after "
                "accepting it: another client (a second fastvoice?) uses the same id and takes "
                "the session over; give each service its own mqtt.client_id (or leave it unset: "
                "the default follows mqtt.base_topic)"
            )
            log.error("%s", self.problem)

    def _on_message(self, _client, _userdata, message) -> None:
        suffix = message.topic.removeprefix(self.base + "/")
        handler = self.handlers.get(suffix)
        if handler is None:
            return
        try:
            handler(message.payload)
        except Exception:
            log.exception("handler for %s failed", message.topic)

    @staticmethod
    def _external_callback(handler: TopicHandler):
        def callback(_client, _userdata, message) -> None:
            try:
                handler(message.topic, message.payload)
            except Exception:
                log.exception("handler for %s failed", message.topic)

        return callback
