"""Time to first audio through each interface of `fastvoice serve`, interleaved, medians.

Starts its own mosquitto and one service (Hermes and Home Assistant discovery on, Wyoming on a
free port, phrase cache off) and sends the same sentence through: MQTT `say` with PCM published
back (client side: publish → first chunk), Home Assistant's notify topic and Hermes `say` (both
play on the box: from the job's events, queue wait + time to the first audio synthesized), and
Wyoming
`synthesize` (client side: request → first audio-chunk), and over HTTP (client side: request →
first bytes of audio) `GET /api/tts` and the OpenAI-compatible `/v1/audio/speech` (PCM, through
the official `openai` client).
Run: .venv/bin/python tools/interface_latency.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.bench_servers import wyoming_requests  # noqa: E402
from tools.service_timing import capture_device, free_port, start_broker  # noqa: E402

TEXT = "The train to the airport leaves from platform four in five minutes."
BASE = "latency/box"


class Client:
    """Records every message on the service's and Hermes's topics, with arrival times."""

    def __init__(self, port: int) -> None:
        self.inbox: queue.Queue[tuple[float, str, bytes]] = queue.Queue()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        self.client.on_message = lambda _c, _u, m: self.inbox.put(
            (time.perf_counter(), m.topic, m.payload)
        )
        self.client.connect("127.0.0.1", port)
        self.client.subscribe([(f"{BASE}/#", 1), ("hermes/#", 1)])
        self.client.loop_start()

    def publish(self, topic: str, payload: str) -> float:
        sent = time.perf_counter()
        self.client.publish(topic, payload, qos=1)
        return sent

    def wait(self, predicate, timeout: float = 60) -> tuple[float, str, bytes]:
        deadline = time.monotonic() + timeout
        while True:
            arrived, topic, payload = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            if predicate(topic, payload):
                return arrived, topic, payload

    def job_first_audio(self, is_job) -> float:
        """Queue wait + time to first audio from the job's `finished` event."""

        def finished(topic: str, payload: bytes) -> bool:
            if topic != f"{BASE}/events":
                return False
            event = json.loads(payload)
            return event["event"] == "finished" and is_job(event["id"])

        event = json.loads(self.wait(finished)[2])
        return event["queue_wait_s"] + event["first_audio_s"]


def mqtt_pcm(client: Client, run: int) -> float:
    reply = f"{BASE}/reply/{run}"
    say = {"id": f"pcm-{run}", "text": TEXT, "output": "publish", "reply_topic": reply}
    sent = client.publish(f"{BASE}/say", json.dumps({**say, "format": "pcm"}))
    arrived, _, _ = client.wait(lambda topic, _payload: topic == reply)
    client.job_first_audio(lambda job: job == f"pcm-{run}")
    return arrived - sent


def notify(client: Client, run: int) -> float:
    client.publish(f"{BASE}/say", TEXT)  # what Home Assistant's notify entity publishes
    return client.job_first_audio(lambda job: not job.startswith(("pcm-", "hermes-")))


def hermes(client: Client, run: int) -> float:
    say = {"text": TEXT, "siteId": "default", "id": f"h-{run}", "sessionId": None}
    client.publish("hermes/tts/say", json.dumps(say))
    return client.job_first_audio(lambda job: job.startswith("hermes-"))


def wyoming(port: int) -> float:
    ((first, _whole),) = wyoming_requests(port, TEXT, 1)
    return first


def http_tts(url: str) -> float:
    import httpx

    began = time.perf_counter()
    with httpx.stream("GET", f"{url}/api/tts", params={"text": TEXT}, timeout=60) as response:
        for chunk in response.iter_bytes():
            if len(chunk) > 44:  # past the WAV header: audio
                return time.perf_counter() - began
    raise RuntimeError("no audio came back")


def openai_speech(client) -> float:
    began = time.perf_counter()
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="en_US-joe-medium", input=TEXT, response_format="pcm"
    ) as response:
        for _chunk in response.iter_bytes():
            return time.perf_counter() - began
    raise RuntimeError("no audio came back")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        capture_device(directory)
        port, broker = start_broker(directory)
        wyoming_port, http_port = free_port(), free_port()
        settings = {
            "mqtt": {"port": port, "base_topic": BASE},
            "cache": {"enabled": False},
            "queue": {"journal_dir": str(directory / "jobs")},  # not the user's job journal
            # The capture device plays as fast as it is fed; its callback would compete with
            # synthesis for the CPU. Buffering whole jobs keeps the synthesis times honest.
            "audio": {"prefill_s": 300},
            "hermes": {"enabled": True},
            "homeassistant": {"discovery": True},
            "wyoming": {"uri": f"tcp://127.0.0.1:{wyoming_port}"},
            "http": {"listen": f"127.0.0.1:{http_port}"},
        }
        (directory / "fastvoice.yaml").write_text(json.dumps(settings))
        client = Client(port)
        service = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daemon",
                "serve",
                "--config",
                str(directory / "fastvoice.yaml"),
            ],
            env={**os.environ, "XDG_CONFIG_HOME": str(directory)},
            stderr=subprocess.DEVNULL,
        )
        try:
            client.wait(lambda topic, payload: topic == f"{BASE}/status" and payload == b"online")
            for listening in (wyoming_port, http_port):
                while socket.socket().connect_ex(("127.0.0.1", listening)) != 0:
                    time.sleep(0.05)
            from openai import OpenAI

            url = f"http://127.0.0.1:{http_port}"
            speech = OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
            results: dict[str, list[float]] = {}
            measures = {
                "MQTT say, PCM published back (client side)": lambda n: mqtt_pcm(client, n),
                "Home Assistant notify, played (job events)": lambda n: notify(client, n),
                "Hermes tts/say, played (job events)": lambda n: hermes(client, n),
                "Wyoming synthesize (client side)": lambda _n: wyoming(wyoming_port),
                "HTTP GET /api/tts (client side)": lambda _n: http_tts(url),
                "OpenAI /v1/audio/speech, PCM (client side)": lambda _n: openai_speech(speech),
            }
            for run in range(args.runs + 1):  # the first round warms up
                for name, measure in measures.items():
                    value = measure(run)
                    if run:
                        results.setdefault(name, []).append(value)
        finally:
            service.terminate()
            service.wait(30)
            broker.terminate()
    print("| interface | first audio, median (min-max) |\n|---|---|")
    for name, values in results.items():
        print(
            f"| {name} | {statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f}) |"
        )


if __name__ == "__main__":
    main()
