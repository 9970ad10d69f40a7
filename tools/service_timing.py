"""Process start → READY=1 and → first audio of a first command, for `fastvoice serve`.

Starts its own mosquitto and a `fastvoice serve` writing to a WAV-less capture device, N times;
prints medians (min-max). Run: .venv/bin/python tools/service_timing.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_run(directory: Path, port: int) -> tuple[float, float]:
    base = f"timing/{os.getpid()}/{time.monotonic_ns()}"
    config = directory / "fastvoice.yaml"
    settings = {
        "mqtt": {"port": port, "base_topic": base},
        "cache": {"enabled": False},
        "queue": {"journal_dir": str(directory / "jobs")},  # not the user's job journal
    }
    config.write_text(json.dumps(settings))
    notify_path = directory / f"notify-{time.monotonic_ns()}.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    events: list[dict] = []
    online: list[bool] = []
    client = mqtt.Client(CallbackAPIVersion.VERSION2)

    def on_message(_client, _userdata, message) -> None:
        if message.topic.endswith("/status"):
            online.append(message.payload == b"online")
        else:
            events.append(json.loads(message.payload))

    client.on_message = on_message
    client.connect("127.0.0.1", port)
    client.subscribe([(f"{base}/events", 1), (f"{base}/status", 1)])
    client.loop_start()
    env = {**os.environ, "NOTIFY_SOCKET": str(notify_path), "XDG_CONFIG_HOME": str(directory)}
    started, wall_start = time.monotonic(), time.time()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "fastvoice"), "serve", "--config", str(config)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        while notify.recv(4096) != b"READY=1":
            pass
        ready = time.monotonic() - started
        while not any(online):
            time.sleep(0.005)
        client.publish(f"{base}/say", "The first announcement of the day.", qos=1)
        while not any(e["event"] == "finished" for e in events):
            time.sleep(0.005)
        finished = next(e for e in events if e["event"] == "finished")
        started_event = next(e for e in events if e["event"] == "started")
        return ready, started_event["time"] + finished["first_audio_s"] - wall_start
    finally:
        process.terminate()
        process.wait(30)
        client.loop_stop()
        notify.close()


def capture_device(directory: Path) -> None:
    """A PortAudio default device that writes what it plays (found through XDG_CONFIG_HOME)."""
    (directory / "alsa").mkdir()
    capture = directory / "out.raw"
    (directory / "alsa" / "asoundrc").write_text(
        f'pcm.!default {{ type file slave.pcm "null" file "{capture}" format "raw" }}\n'
    )


def start_broker(directory: Path) -> tuple[int, subprocess.Popen]:
    """A mosquitto of our own on a free port, accepting connections when this returns."""
    port = free_port()
    (directory / "mosquitto.conf").write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
    )
    broker = subprocess.Popen(
        ["mosquitto", "-c", str(directory / "mosquitto.conf")], stderr=subprocess.DEVNULL
    )
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        time.sleep(0.05)
    return port, broker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        capture_device(directory)
        port, broker = start_broker(directory)
        try:
            results = [one_run(directory, port) for _ in range(args.runs)]
        finally:
            broker.terminate()
    for label, values in zip(("READY", "first audio"), zip(*results, strict=True), strict=True):
        print(
            f"process start → {label}: median {statistics.median(values):.3f} s "
            f"({min(values):.3f}-{max(values):.3f})"
        )


if __name__ == "__main__":
    main()
