"""One Wyoming client connection: its events read with their sizes checked, answered in turn.

Imported only when the Wyoming server runs (it imports the wyoming library).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from daemon.audio.pcm import to_int16
from daemon.audio.sinks.handoff import Handoff
from daemon.errors import FastvoiceError, reason_code
from daemon.service.commands import CommandError
from daemon.text.trickle import TextTrickle

if TYPE_CHECKING:
    from wyoming.tts import SynthesizeVoice

    from daemon.adapters.wyoming_speech import WyomingSpeech

log = logging.getLogger(__name__)

WIDTH, CHANNELS = 2, 1
MAX_CHUNK_SAMPLES = 16_384  # one audio-chunk event holds at most this much (0.7 s at 22 kHz)


class EventRefused(Exception):
    """An event whose header claims more bytes than a request may have; the client is told
    (an `error` event with `code`) and dropped."""

    code = "too_large"
    resumable = False  # whether the next event can still be read after it


class MalformedEvent(EventRefused):
    """What the client sent is not a Wyoming event (a line that is not a JSON header, data
    that is not a JSON object): it is told so, and its next event is read when the stream is
    still in step (it is not where a header's byte counts cannot be read)."""

    code = "bad_request"

    def __init__(self, message: str, resumable: bool = True) -> None:
        super().__init__(message)
        self.resumable = resumable


async def read_event(reader: asyncio.StreamReader, max_bytes: int):
    """The next event, or None at the end of the stream. Like wyoming's own reader, but the
    claimed data and payload lengths are checked before anything is read (that reader would
    buffer whatever size a client claims), and what is not an event raises MalformedEvent."""
    try:
        line = await reader.readline()  # the stream's limit bounds the header line
    except ValueError:
        raise EventRefused("event header line is too long") from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        shown = line[:60].decode("utf-8", "replace").strip()
        raise MalformedEvent(f"not a Wyoming event (a JSON header line): {shown!r}") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise MalformedEvent("an event header is a JSON object with a `type` string")
    lengths = {key: header.get(key) or 0 for key in ("data_length", "payload_length")}
    for key, length in lengths.items():
        if not isinstance(length, int) or length < 0:
            raise MalformedEvent(f"{key}: {length!r} is not a byte count", resumable=False)
        if length > max_bytes:
            raise EventRefused(f"{key} {length} is above the maximum {max_bytes} bytes")
    try:
        extra = await reader.readexactly(lengths["data_length"])
        payload = await reader.readexactly(lengths["payload_length"]) or None
    except asyncio.IncompleteReadError:
        return None  # the stream ended inside the event
    data = header.get("data") if isinstance(header.get("data"), dict) else {}
    if extra:
        try:
            added = json.loads(extra)
        except ValueError:
            added = None
        if not isinstance(added, dict):
            raise MalformedEvent(f"{header['type']}: its data is not a JSON object")
        data.update(added)
    return Event(type=header["type"], data=data, payload=payload)


@dataclass
class _Stream:
    """One client's streamed request: what its start asked for, the text not yet spoken, and
    whether audio has started."""

    voice: SynthesizeVoice | None
    context: dict[str, Any] | None
    text: TextTrickle
    chosen: str  # the voice chosen at its start, which speaks all of it
    rate: int
    ssml: bool = False  # SSML is spoken whole, at the stream's end
    started: bool = False
    tried: bool = False  # some of its text was handed to the synthesizer


def _ssml(request: Synthesize | SynthesizeStart) -> bool:
    """Whether the client marked its text as SSML (wyoming 1.10's `text_format`)."""
    text_format = getattr(request, "text_format", None)
    return getattr(text_format, "value", text_format) == "ssml"


class WyomingConnection(AsyncEventHandler):
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, speech: WyomingSpeech
    ) -> None:
        super().__init__(reader, writer)
        self.speech = speech
        self.stream: _Stream | None = None

    async def run(self) -> None:
        """Like the library's loop, but with the event reader above; `stop()` ends it too (it
        feeds the reader its end)."""
        reading: asyncio.Future | None = None
        try:
            while True:
                max_bytes = self.speech.config.queue.max_payload_bytes
                if reading is None:
                    reading = asyncio.ensure_future(read_event(self.reader, max_bytes))
                # A stream's text trickles in from a slow assistant: gaps are waited out, up to
                # `wyoming.stream_idle_s` of silence, then what it held is spoken and it ends.
                idle = self.speech.config.wyoming.stream_idle_s if self.stream else None
                done, _ = await asyncio.wait({reading}, timeout=idle)
                if not done:
                    log.info("wyoming: a streamed synthesis idle for %g s: ended", idle)
                    try:
                        await self._end_stream()
                    except FastvoiceError as error:
                        error_event = Error(text=str(error), code=reason_code(error))
                        await self.write_event(error_event.event())
                    continue
                finished, reading = reading, None
                try:
                    event = finished.result()
                except EventRefused as error:
                    await self.write_event(Error(text=str(error), code=error.code).event())
                    if error.resumable:
                        continue
                    log.warning("wyoming: client dropped: %s", error)
                    break
                if event is None or not await self.handle_event(event):
                    break
        finally:
            if reading is not None:
                reading.cancel()
            await self.disconnect()
            self.writer.close()

    async def handle_event(self, event) -> bool:
        try:
            await self._handle(event)
        except FastvoiceError as error:
            await self.write_event(Error(text=str(error), code=reason_code(error)).event())
        except CommandError as error:  # a field out of range, as MQTT's `invalid` names it
            await self.write_event(Error(text=str(error), code="invalid").event())
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            message = f"malformed {event.type} event: {error!r}"
            await self.write_event(Error(text=message, code="bad_request").event())
        return True

    async def _handle(self, event) -> None:
        if Describe.is_type(event.type):
            await self.write_event(self.speech.info().event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            trickle = TextTrickle(self.speech.config.text.max_sentence_chars)
            chosen = self.speech.voice_of(start.voice)
            rate = self.speech.rate_of(chosen)
            self.stream = _Stream(start.voice, start.context, trickle, chosen, rate, _ssml(start))
        elif SynthesizeChunk.is_type(event.type) and self.stream is not None:
            self.stream.text.add(SynthesizeChunk.from_event(event).text)
            await self._speak_ready(final=False)
        elif SynthesizeStop.is_type(event.type) and self.stream is not None:
            await self._end_stream()
        elif Synthesize.is_type(event.type):
            if self.stream is not None:
                return  # streaming clients also send it, for servers that cannot stream
            synthesize = Synthesize.from_event(event)
            request = self.speech.request(
                synthesize.text, synthesize.voice, synthesize.context, ssml=_ssml(synthesize)
            )
            audio, rate = self.speech.audio(request)
            try:
                await audio.peek()  # text with nothing to say fails before audio-start
                start = AudioStart(rate=rate, width=WIDTH, channels=CHANNELS)
                await self.write_event(start.event())
                try:
                    await self._sent(audio, rate)
                finally:
                    await self.write_event(AudioStop().event())
            finally:
                await audio.close()

    async def _end_stream(self) -> None:
        """Speaks what the stream holds, then ends it (audio-stop, synthesize-stopped)."""
        try:
            await self._speak_ready(final=True)
        finally:
            stream, self.stream = self.stream, None
            assert stream is not None
            if not stream.started:  # nothing speakable: still a whole (empty) stream
                start = AudioStart(rate=stream.rate, width=WIDTH, channels=CHANNELS)
                await self.write_event(start.event())
            await self.write_event(AudioStop().event())
            await self.write_event(SynthesizeStopped().event())

    async def _speak_ready(self, final: bool) -> None:
        """Speaks the complete sentences received so far (all of it when `final`)."""
        stream = self.stream
        assert stream is not None
        if stream.ssml and not final:
            return
        text = stream.text.rest() if final else stream.text.ready()
        # A stream that ends with no text to say is refused as the same text sent whole is.
        if not text.strip() and (stream.tried or not final):
            return
        stream.tried = True
        request = self.speech.request(text, stream.voice, stream.context, ssml=stream.ssml)
        audio, _ = self.speech.audio(request.model_copy(update={"voice": stream.chosen}))
        try:
            await audio.peek()
            if not stream.started:
                start = AudioStart(rate=stream.rate, width=WIDTH, channels=CHANNELS)
                await self.write_event(start.event())
                stream.started = True
            else:  # the pause between sentences, as between those of one request
                pause_s = request.sentence_pause_s
                if pause_s is None:
                    pause_s = self.speech.config.audio.sentence_pause_s
                await self._send(np.zeros(int(stream.rate * pause_s), np.float32), stream.rate)
            await self._sent(audio, stream.rate)
        finally:
            await audio.close()

    async def _sent(self, audio: Handoff, rate: int) -> None:
        """Sends the blocks as they are made (on the render threads, while the loop serves
        other clients)."""
        while (block := await audio.next()) is not None:
            await self._send(block, rate)

    async def _send(self, block: np.ndarray | None, rate: int) -> None:
        if block is None:
            return
        pcm = to_int16(block)
        for start in range(0, len(pcm), MAX_CHUNK_SAMPLES):
            piece = pcm[start : start + MAX_CHUNK_SAMPLES].tobytes()
            chunk = AudioChunk(rate=rate, width=WIDTH, channels=CHANNELS, audio=piece)
            await self.write_event(chunk.event())
