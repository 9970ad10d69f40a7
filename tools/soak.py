"""Soak: `say` commands published as fast as the broker takes them, then the books are checked.

The mix: valid JSON jobs of every priority (some published back, some critical), plain text,
repeated ids and invalid payloads. Every published message must get exactly one answer
(`queued` or `rejected`), the queue bound must hold, every accepted job must end exactly once,
and RSS after the run must stay near RSS before it. tests/test_soak.py asserts the invariants;
this script also prints the figures.
Run: .venv/bin/python tools/soak.py [--count 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TEXTS = [
    "Platform four.",
    "The doors are closing.",
    "Mind the gap.",
    "Next stop, Central Station.",
    "Please stand clear.",
    "The lift is out of order.",
]
INVALID = [
    b'{"text": "unclosed"',
    b'{"text": "hi", "colour": "red"}',
    b'{"text": ""}',  # a `say` with nothing to say: bad_text
    b'{"text": 5}',
    b'{"text": "hi", "priority": "urgent"}',
    b"\xff\xfe\x00junk",
    b"[1, 2, 3]",
]
ENDS = ("finished", "failed", "interrupted")


def make_commands(count: int, base: str, seed: int = 7) -> list[bytes]:
    """The payloads, in publishing order (the same for a given seed)."""
    rng = random.Random(seed)
    payloads: list[bytes] = []
    ids: list[str] = []
    for number in range(count):
        roll = rng.random()
        if roll < 0.10 and ids:
            payloads.append(json.dumps({"id": rng.choice(ids), "text": "Again."}).encode())
        elif roll < 0.20:
            payloads.append(rng.choice(INVALID))
        elif roll < 0.30:
            payloads.append(rng.choice(TEXTS).encode())
        else:
            job = {
                "id": f"soak-{seed}-{number}",
                "text": rng.choice(TEXTS),
                "priority": rng.choice(["low", "normal", "high"] * 10 + ["critical"]),
            }
            if rng.random() < 0.3:
                job.update(output="publish", reply_topic=f"{base}/reply/soak", format="wav")
            ids.append(job["id"])
            payloads.append(json.dumps(job).encode())
    return payloads


@dataclass
class Ledger:
    """What the service answered, from its events, and what is wrong with it."""

    max_jobs: int
    answers: int = 0
    rejected: Counter = field(default_factory=Counter)
    queued: Counter = field(default_factory=Counter)
    ended: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    deepest_queue: int = 0

    def add(self, event: dict) -> None:
        kind, job = event["event"], event["id"]
        if kind == "queued":
            self.answers += 1
            self.queued[job] += 1
            self.deepest_queue = max(self.deepest_queue, event.get("queue_depth", 0))
        elif kind == "rejected" and event.get("reason") != "expired":
            self.answers += 1
            self.rejected[event["reason"]] += 1
        elif kind in ENDS or kind == "rejected":
            self.ended[job] += 1
            self.outcomes[kind] += 1

    def settled(self, published: int) -> bool:
        return self.answers >= published and all(self.ended[job] for job in self.queued)

    def problems(self, published: int) -> list[str]:
        found = []
        if self.answers != published:
            found.append(f"{published} messages got {self.answers} answers")
        found += [f"{job} accepted {n} times" for job, n in self.queued.items() if n != 1]
        found += [
            f"{job} ended {self.ended[job]} times" for job in self.queued if self.ended[job] != 1
        ]
        found += [
            f"{job} ended but was never accepted" for job in self.ended if job not in self.queued
        ]
        if self.deepest_queue > self.max_jobs:
            found.append(f"queue depth {self.deepest_queue} above the bound {self.max_jobs}")
        unexpected = set(self.rejected) - {"invalid", "bad_text", "duplicate", "queue_full"}
        found += [f"unexpected rejection reason {reason!r}" for reason in sorted(unexpected)]
        return found

    def figures(self) -> dict:
        return {
            "answers": self.answers,
            "accepted": len(self.queued),
            "rejected": dict(self.rejected),
            "ended": dict(self.outcomes),
            "deepest_queue": self.deepest_queue,
        }


def main() -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from tools.service_timing import capture_device, start_broker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--max-jobs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="RSS is read after each round")
    args = parser.parse_args()
    base = "soak/box"
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        port, broker = start_broker(directory)
        capture_device(directory)
        config = directory / "fastvoice.yaml"
        config.write_text(
            json.dumps(
                {
                    "mqtt": {"port": port, "base_topic": base, "stats_interval_s": 1},
                    "queue": {"max_jobs": args.max_jobs, "journal_dir": str(directory / "jobs")},
                    "cache": {"dir": str(directory / "cache")},
                }
            )
        )
        env = {"XDG_CONFIG_HOME": str(directory), "PATH": "/usr/bin:/bin"}
        service = subprocess.Popen(
            [str(Path(sys.executable).parent / "fastvoice"), "serve", "--config", str(config)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        ledger = Ledger(args.max_jobs)
        rss: list[int] = []
        online = []
        client = mqtt.Client(CallbackAPIVersion.VERSION2)

        def on_message(_client, _userdata, message) -> None:
            if message.topic == f"{base}/events":
                ledger.add(json.loads(message.payload))
            elif message.topic == f"{base}/stats":
                rss.append(json.loads(message.payload)["rss_bytes"])
            elif message.topic == f"{base}/status" and message.payload == b"online":
                online.append(True)

        client.on_message = on_message
        client.connect("127.0.0.1", port)
        client.subscribe([(f"{base}/events", 1), (f"{base}/stats", 1), (f"{base}/status", 1)])
        client.loop_start()
        try:
            while not online or not rss:
                time.sleep(0.1)
            readings = [rss[-1]]
            published = 0
            for round_number in range(args.rounds):
                payloads = make_commands(args.count, base, seed=round_number)
                started = time.perf_counter()
                for payload in payloads:
                    client.publish(f"{base}/say", payload, qos=1)
                published += len(payloads)
                while not ledger.settled(published):
                    time.sleep(0.1)
                seen = len(rss)
                while len(rss) <= seen + 1:  # a reading taken after the round settled
                    time.sleep(0.1)
                readings.append(rss[-1])
                print(
                    f"round {round_number + 1}: {len(payloads)} published, settled after "
                    f"{time.perf_counter() - started:.2f} s, RSS {rss[-1] / 1e6:.1f} MB"
                )
        finally:
            client.loop_stop()
            service.terminate()
            service.wait(30)
            broker.terminate()
        print(json.dumps(ledger.figures(), indent=2))
        print("RSS (MB) at start and after each round:", [round(r / 1e6, 1) for r in readings])
        problems = ledger.problems(published)
        print("problems:", problems or "none")
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
