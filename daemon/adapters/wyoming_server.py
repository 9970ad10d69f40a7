"""A Wyoming TTS server (Home Assistant's voice protocol), on its own thread and event loop.

`describe` → `info` with our voices; `synthesize` → `audio-start`, `audio-chunk`s as each piece
of audio is made, `audio-stop`; the streaming form (`synthesize-start`, `-chunk`s, `-stop`)
speaks each complete sentence as soon as its text has arrived and ends with
`synthesize-stopped`. Synthesis runs in the loop's thread pool, so clients are served side by
side by the synthesizer's parallel workers, as many at once as there are workers (`max_requests`,
first come first served): more would only share the same cores, and every one of them would end
late. Bad requests get an `error` event naming the problem, and the connection stays open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from daemon import __version__
from daemon.audio.pcm import join_sentences, to_int16
from daemon.config import AudioConfig, TextConfig
from daemon.errors import FastvoiceError, reason_code
from daemon.synthesizer import Synthesizer
from daemon.text import complete_sentences_end
from daemon.voices.base import SpeechOptions

log = logging.getLogger(__name__)

WIDTH, CHANNELS = 2, 1
MAX_CHUNK_SAMPLES = 16_384  # one audio-chunk event holds at most this much (0.7 s at 22 kHz)


class EventRefused(Exception):
    """An event whose header claims more bytes than a request may have; the client is dropped."""


async def read_event(reader: asyncio.StreamReader, max_bytes: int):
    """The next event, or None at the end or on junk. Like wyoming's own reader, but the claimed
    data and payload lengths are checked before anything is read: that reader would buffer
    whatever size a client claims."""
    from wyoming.event import Event

    try:
        line = await reader.readline()  # the stream's limit bounds the header line
    except ValueError:
        raise EventRefused("event header line is too long") from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        return None
    lengths = {key: header.get(key) or 0 for key in ("data_length", "payload_length")}
    for key, length in lengths.items():
        if not isinstance(length, int) or length < 0:
            return None
        if length > max_bytes:
            raise EventRefused(f"{key} {length} is above the maximum {max_bytes} bytes")
    data = header.get("data") if isinstance(header.get("data"), dict) else {}
    try:
        if lengths["data_length"]:
            extra = json.loads(await reader.readexactly(lengths["data_length"]))
            if not isinstance(extra, dict):
                return None
            data.update(extra)
        payload = None
        if lengths["payload_length"]:
            payload = await reader.readexactly(lengths["payload_length"])
    except (asyncio.IncompleteReadError, ValueError):
        return None
    return Event(type=header["type"], data=data, payload=payload)


@dataclass
class _Stream:
    """One client's streamed request: text not yet spoken, and whether audio has started."""

    voice: str | None
    speaker: str | None
    pending: str = ""
    started: bool = False
    rate: int = 0


class WyomingServer(threading.Thread):
    def __init__(
        self,
        uri: str,
        synthesizer: Synthesizer,
        audio: AudioConfig,
        text: TextConfig,
        default_voice: Callable[[], str],
        max_event_bytes: int,
        max_requests: int = 1,
    ) -> None:
        """`max_event_bytes` bounds what one client event may carry (as MQTT commands are);
        `max_requests` requests are synthesized at once, the others wait their turn."""
        super().__init__(name="wyoming", daemon=True)
        self.admission = threading.Semaphore(max_requests)
        self.max_event_bytes = max_event_bytes
        self.uri = uri
        self.synthesizer = synthesizer
        self.audio = audio
        self.text = text
        self.default_voice = default_voice
        self.ready = threading.Event()
        self.error: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        from wyoming.server import AsyncServer

        self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
        server = AsyncServer.from_uri(self.uri)
        try:
            await server.start(lambda reader, writer: _client(self, reader, writer))
        except OSError as error:
            self.error = f"wyoming: cannot listen on {self.uri}: {error.strerror or error}"
            self.ready.set()
            return
        log.info("wyoming: serving on %s", self.uri)
        self.ready.set()
        await self._stopped.wait()
        await server.stop()

    def shutdown(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self.join(timeout=10)

    def info(self):
        from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

        attribution = Attribution(name="fastvoice", url="")
        voices = []
        for name in self.synthesizer.voices.names:
            info = self.synthesizer.voices.get(name).info
            voices.append(
                TtsVoice(
                    name=name,
                    description=f"{name} ({info.family}, {info.sample_rate} Hz)",
                    attribution=attribution,
                    installed=True,
                    version=None,
                    languages=[info.language],
                    speakers=[TtsVoiceSpeaker(s) for s in info.speakers] or None,
                )
            )
        program = TtsProgram(
            name="fastvoice",
            description="offline neural text to speech",
            attribution=attribution,
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    def blocks(self, text: str, voice: str | None, speaker: str | None) -> Iterator[np.ndarray]:
        """The audio of `text` as `fastvoice say` makes it (sentence pauses and fades)."""
        options = SpeechOptions(speaker=int(speaker) if speaker and speaker.isdigit() else speaker)
        name = voice or self.default_voice()
        chunks = self.synthesizer.synthesize(text, name, options)
        return self._admitted(
            join_sentences(
                ((chunk.samples, chunk.sentence_end) for chunk in chunks),
                self.rate_of(name),
                self.audio.sentence_pause_s,
                self.audio.fade_ms,
            )
        )

    def _admitted(self, blocks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """The blocks, made while this request holds one of the `max_requests` places (taken
        at its first block, given back at its end, or when the client goes and the generator
        is closed)."""
        with self.admission:
            yield from blocks

    def rate_of(self, voice: str | None) -> int:
        return self.synthesizer.voices.get(voice or self.default_voice()).info.sample_rate


def _client(server: WyomingServer, reader, writer):
    """A handler per connection (a factory, so that wyoming is imported only when it serves)."""
    from wyoming.audio import AudioChunk, AudioStart, AudioStop
    from wyoming.error import Error
    from wyoming.info import Describe
    from wyoming.server import AsyncEventHandler
    from wyoming.tts import (
        Synthesize,
        SynthesizeChunk,
        SynthesizeStart,
        SynthesizeStop,
        SynthesizeStopped,
    )

    class Client(AsyncEventHandler):
        def __init__(self) -> None:
            super().__init__(reader, writer)
            self.stream: _Stream | None = None

        async def run(self) -> None:
            self._is_running = True
            try:
                while self._is_running:
                    try:
                        event = await read_event(self.reader, server.max_event_bytes)
                    except EventRefused as error:
                        log.warning("wyoming: client dropped: %s", error)
                        await self.write_event(Error(text=str(error), code="too_large").event())
                        break
                    if event is None or not await self.handle_event(event):
                        break
            finally:
                await self.disconnect()
                self.writer.close()

        async def handle_event(self, event) -> bool:
            try:
                await self._handle(event)
            except FastvoiceError as error:
                await self.write_event(Error(text=str(error), code=reason_code(error)).event())
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                message = f"malformed {event.type} event: {error!r}"
                await self.write_event(Error(text=message, code="bad_request").event())
            return True

        async def _handle(self, event) -> None:
            if Describe.is_type(event.type):
                await self.write_event(server.info().event())
            elif SynthesizeStart.is_type(event.type):
                start = SynthesizeStart.from_event(event)
                voice = start.voice
                self.stream = _Stream(voice and voice.name, voice and voice.speaker)
                self.stream.rate = server.rate_of(self.stream.voice)
            elif SynthesizeChunk.is_type(event.type) and self.stream is not None:
                self.stream.pending += SynthesizeChunk.from_event(event).text
                await self._speak_ready(final=False)
            elif SynthesizeStop.is_type(event.type) and self.stream is not None:
                try:
                    await self._speak_ready(final=True)
                finally:
                    stream, self.stream = self.stream, None
                    if not stream.started:  # nothing speakable: still a whole (empty) stream
                        start = AudioStart(rate=stream.rate, width=WIDTH, channels=CHANNELS)
                        await self.write_event(start.event())
                    await self.write_event(AudioStop().event())
                    await self.write_event(SynthesizeStopped().event())
            elif Synthesize.is_type(event.type):
                if self.stream is not None:
                    return  # streaming clients also send it, for servers that cannot stream
                request = Synthesize.from_event(event)
                voice = request.voice
                name, speaker = (voice.name, voice.speaker) if voice else (None, None)
                rate = server.rate_of(name)
                blocks = server.blocks(request.text, name, speaker)
                first = await self._next(blocks)  # bad text or voice fails before audio-start
                start = AudioStart(rate=rate, width=WIDTH, channels=CHANNELS)
                await self.write_event(start.event())
                try:
                    await self._send(first, rate)
                    while (block := await self._next(blocks)) is not None:
                        await self._send(block, rate)
                finally:
                    await self.write_event(AudioStop().event())

        async def _speak_ready(self, final: bool) -> None:
            """Speaks the complete sentences received so far (all of it when `final`)."""
            stream = self.stream
            assert stream is not None
            end = len(stream.pending) if final else complete_sentences_end(stream.pending)
            if not final and end == 0 and len(stream.pending) > server.text.max_sentence_chars:
                end = stream.pending.rfind(" ", 0, server.text.max_sentence_chars) + 1
            text, stream.pending = stream.pending[:end], stream.pending[end:]
            if not text.strip():
                return
            blocks = server.blocks(text, stream.voice, stream.speaker)
            first = await self._next(blocks)
            if not stream.started:
                start = AudioStart(rate=stream.rate, width=WIDTH, channels=CHANNELS)
                await self.write_event(start.event())
                stream.started = True
            else:
                pause = np.zeros(int(stream.rate * server.audio.sentence_pause_s), np.float32)
                await self._send(pause, stream.rate)
            await self._send(first, stream.rate)
            while (block := await self._next(blocks)) is not None:
                await self._send(block, stream.rate)

        @staticmethod
        async def _next(blocks: Iterator[np.ndarray]) -> np.ndarray | None:
            """The next block, made in the thread pool while the loop serves other clients."""
            return await asyncio.get_running_loop().run_in_executor(None, next, blocks, None)

        async def _send(self, block: np.ndarray | None, rate: int) -> None:
            if block is None:
                return
            pcm = to_int16(block)
            for start in range(0, len(pcm), MAX_CHUNK_SAMPLES):
                piece = pcm[start : start + MAX_CHUNK_SAMPLES].tobytes()
                chunk = AudioChunk(rate=rate, width=WIDTH, channels=CHANNELS, audio=piece)
                await self.write_event(chunk.event())

    return Client()
