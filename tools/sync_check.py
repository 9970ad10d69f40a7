"""How together boxes given one `at` start: N `fastvoice serve` processes on one machine, all
playing into one PulseAudio null sink, one recording of its monitor. Each box plays a tone of its
own frequency and nothing else (SSML `<audio>`: speech said together by every box would sum in
each band and could outweigh a tone); its onset in the recording is where that band's envelope
reaches half its peak. Prints each run's onset spread (latest minus earliest) and their median
and maximum.

Run: .venv/bin/python tools/sync_check.py [--boxes 5] [--runs 5] [--lead-s 3]
Needs mosquitto, pulseaudio and pulseaudio-utils (tools/setup-dev.sh installs them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.service_timing import start_broker  # noqa: E402
from tools.sound_server import SoundServer  # noqa: E402

RECORD_RATE = 44100
VOICE_RATE = 22050


def tone_hz(box: int) -> float:
    return 500.0 + 300.0 * box


def write_tone(path: Path, frequency: float) -> None:
    import soundfile

    t = np.arange(int(0.4 * VOICE_RATE)) / VOICE_RATE
    soundfile.write(path, 0.5 * np.sin(2 * np.pi * frequency * t), VOICE_RATE)


def onset_s(recording: np.ndarray, frequency: float, rate: int = RECORD_RATE) -> float:
    """Where the tone of `frequency` begins in `recording`: its band's envelope (±40 Hz)
    reaching half its peak."""
    spectrum = np.fft.rfft(recording)
    frequencies = np.fft.rfftfreq(len(recording), 1 / rate)
    spectrum[np.abs(frequencies - frequency) > 40] = 0
    envelope = np.abs(np.fft.irfft(spectrum, len(recording)))
    return float(np.argmax(envelope > 0.5 * envelope.max()) / rate)


class Events:
    """Every box's job events, from the broker."""

    def __init__(self, port: int, prefix: str) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.seen: list[tuple[str, dict]] = []
        self.online: set[str] = set()
        self.changed = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.subscribe(f"{prefix}/+/events", qos=1)
        self.client.subscribe(f"{prefix}/+/status", qos=1)
        self.client.loop_start()

    def _on_message(self, _client, _userdata, message) -> None:
        box = message.topic.split("/")[-2]
        with self.changed:
            if message.topic.endswith("/status"):
                if message.payload == b"online":
                    self.online.add(box)
            else:
                self.seen.append((box, json.loads(message.payload)))
            self.changed.notify_all()

    def wait(self, condition, timeout: float = 120) -> None:
        with self.changed:
            if not self.changed.wait_for(condition, timeout):
                raise TimeoutError("the boxes did not all end their job")

    def of(self, job: str, *kinds: str) -> list[dict]:
        """The events of `job` (every box's) of these kinds."""
        return [event for _, event in self.seen if event["id"] == job and event["event"] in kinds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lead-s", type=float, default=3.0, help="`at` this far ahead")
    args = parser.parse_args()
    fastvoice = str(Path(sys.executable).parent / "fastvoice")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        port, broker = start_broker(root)
        sound = SoundServer(root / "pulse")
        sound.start()
        prefix = f"sync-{int(time.time())}"
        events = Events(port, prefix)
        processes = []
        try:
            for box in range(args.boxes):
                directory = root / f"box{box}"
                (directory / "sounds").mkdir(parents=True)
                write_tone(directory / "sounds" / "tone.wav", tone_hz(box))
                config = {
                    "mqtt": {
                        "port": port,
                        "base_topic": f"{prefix}/{box}",
                        "client_id": f"{prefix}-{box}",  # one machine: one id per box
                    },
                    "queue": {"journal_dir": str(directory / "jobs")},
                    "cache": {"enabled": False},
                    "audio": {"device": "speaker_pa", "prefill_s": 0.1},
                    "sounds": {"dir": str(directory / "sounds")},
                }
                (directory / "fastvoice.yaml").write_text(json.dumps(config))
                processes.append(
                    subprocess.Popen(
                        [fastvoice, "serve", "--config", str(directory / "fastvoice.yaml")],
                        env=sound.env(),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            events.wait(lambda: len(events.online) == args.boxes)
            spreads = [run_once(args, root, port, prefix, sound, events) for _ in range(args.runs)]
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
            sound.kill()
            broker.terminate()
    report = {
        "boxes": args.boxes,
        "spreads_ms": [round(s * 1000, 1) for s in spreads],
        "median_ms": round(statistics.median(spreads) * 1000, 1),
        "max_ms": round(max(spreads) * 1000, 1),
    }
    print(json.dumps(report))


def run_once(args, root: Path, port: int, prefix: str, sound: SoundServer, events: Events) -> float:
    """One `say` to every box with the same `at`; the onset spread in the speaker's recording."""
    import paho.mqtt.publish as publish

    recording = root / "speaker.raw"
    raw = ("--raw", f"--rate={RECORD_RATE}", "--channels=1", "--format=s16le")
    with recording.open("wb") as sink:
        recorder = subprocess.Popen(
            ["parec", "-d", "speaker.monitor", *raw], env=sound.env(), stdout=sink
        )
    job = f"sync-{time.monotonic_ns()}"
    at = round((time.time() + args.lead_s) * 1000)
    say = {"id": job, "text": '<speak><audio src="tone"/></speak>', "chime": "none", "at": at}
    for box in range(args.boxes):
        topic = f"{prefix}/{box}/say"
        publish.single(topic, json.dumps(say), qos=1, hostname="127.0.0.1", port=port)
    ends = ("finished", "failed", "interrupted", "rejected")
    try:
        events.wait(lambda: len(events.of(job, *ends)) == args.boxes)
    finally:
        recorder.terminate()
        recorder.wait(10)
    late = events.of(job, "late")
    if late:
        print(f"late: {late}", file=sys.stderr)
    audio = np.frombuffer(recording.read_bytes(), np.int16).astype(np.float32) / 32768
    onsets = [onset_s(audio, tone_hz(box)) for box in range(args.boxes)]
    return max(onsets) - min(onsets)


if __name__ == "__main__":
    main()
