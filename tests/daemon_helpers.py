"""A `fastvoice serve` process of a test's own, against the test broker, recorded."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.mqtt_helpers import Broker, Recorder


class Daemon:
    def __init__(
        self,
        broker: Broker,
        directory: Path,
        env: dict[str, str],
        recorder_options: dict | None = None,
        wait_online: bool = True,
        base: str | None = None,
        **config,
    ) -> None:
        self.base = base or f"fvtest/{uuid.uuid4().hex[:8]}"
        self.port = broker.port
        self.config_path = directory / "fastvoice.yaml"
        self.write_config(broker.port, **config)
        self.notify_path = directory / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notify.settimeout(60)
        self.recorder = Recorder(
            broker.port,
            self.base,
            client_id=f"recorder-{self.base[-8:]}",
            **(recorder_options or {}),
        )
        env = {**env, "NOTIFY_SOCKET": str(self.notify_path), "WATCHDOG_USEC": "2000000"}
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "fastvoice"),
                "serve",
                "--config",
                str(self.config_path),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(directory / "serve.log").open("wb"),
        )
        self._unread: list[str] = []  # notifications read here, not yet by `notifications`
        try:
            # Past its build (on a fresh box a minute or more, each step notified): what a
            # test then waits for (online, or the broker's answer in the log) comes within
            # seconds.
            self._unread = self.notifications(until="STATUS=loading voices")
            if wait_online:
                self.recorder.wait_for(lambda t, p: t == f"{self.base}/status" and p == b"online")
        except TimeoutError:  # socket.timeout too
            self.stop()  # no service left running after a test that could not start it
            raise

    def log_says(self, text: str, timeout: float = 60) -> bool:
        """Whether the service's stderr log shows `text` within `timeout` seconds."""
        log = self.config_path.parent / "serve.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists() and text in log.read_text():
                return True
            time.sleep(0.1)
        return False

    def write_config(
        self, port: int, mqtt: dict | None = None, queue: dict | None = None, **config
    ) -> None:
        mqtt = {"port": port, "base_topic": self.base, "stats_interval_s": 1, **(mqtt or {})}
        # Each daemon its own job journal: jobs left by another test are not this one's.
        queue = {"journal_dir": str(self.config_path.parent / "jobs"), **(queue or {})}
        # Long jobs must really take time to interrupt them: no phrase cache unless a test asks.
        # The capture device plays faster than real time: buffer whole jobs before playing so
        # the capture holds exactly the job's audio, with no underrun gaps.
        data = {
            "mqtt": mqtt,
            "queue": queue,
            "cache": {"enabled": False},
            "audio": {"prefill_s": 300},
            **config,
        }
        self.config_path.write_text(json.dumps(data))

    def notifications(self, until: str) -> list[str]:
        """sd_notify messages received, up to and including the first that starts with `until`."""
        received = []
        while True:
            message = self._unread.pop(0) if self._unread else self.notify.recv(4096).decode()
            received.append(message)
            if message.startswith(until):
                return received

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGUSR1)  # thread dump into serve.log
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(3)  # the time to write it (a stuck service never exits)
                self.process.kill()
                raise
        self.recorder.close()
        self.notify.close()


def say(daemon: Daemon, **fields) -> str:
    fields.setdefault("id", uuid.uuid4().hex[:10])
    daemon.recorder.publish("say", json.dumps(fields))
    return fields["id"]


def fleet_box(broker: Broker, env: dict[str, str], directory: Path, fleet: str, name: str, **mqtt):
    """Box `name` of the fleet topic `fleet` (base topic `<fleet>/<name>`), in a directory of its
    own, with more `mqtt` settings."""
    directory.mkdir(parents=True)
    client_id = f"fv-{name}-{uuid.uuid4().hex[:6]}"
    return Daemon(
        broker, directory, env, base=f"{fleet}/{name}", mqtt={"client_id": client_id, **mqtt}
    )


def front_door_of(synthesizer, settings=None, queue=None, events=None):
    """The service's front door around `synthesizer`, built of the real parts (a queue, an
    intake, events, a player) but with no lane, no broker and no device: for the adapters'
    requests answered beside the queue (Wyoming, HTTP audio). `queue` and `events`: the test's
    own (a queue on its clock, events it reads)."""
    from daemon.audio.player import Player
    from daemon.service.event_sink import EventSink
    from daemon.service.front_door import FrontDoor
    from daemon.service.intake import JobIntake
    from daemon.service.jobs import JobQueue
    from daemon.service.outbox import Outbox

    settings = settings or synthesizer.settings
    if queue is None:  # not `or`: an empty queue is falsy
        queue = JobQueue(settings.config.queue.max_jobs)
    if events is None:
        events = EventSink(Outbox(settings.config.mqtt.base_topic))
    voices = synthesizer.voices
    intake = JobIntake(
        settings=settings, voices=voices, queue=queue, journal=None, events=events, lanes=[]
    )
    return FrontDoor(
        settings=settings,
        intake=intake,
        queue=queue,
        lanes=[],
        player=Player(),
        synthesizer=synthesizer,
        events=events,
    )
