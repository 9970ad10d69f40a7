"""Text to an HTTP audio response, for every route that answers with speech: WAV and PCM
stream as they are made (on a thread of their own per request), FLAC, MP3 and Opus are encoded
whole by libsndfile (soundfile). At most as many requests at once as the service has workers
(the synthesizer's one limit, shared with Wyoming)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from starlette.responses import JSONResponse, Response, StreamingResponse

from daemon.adapters.http_common import HttpError, HttpPorts, speech_refused
from daemon.audio.encoding import MEDIA_TYPES, EncodingError, encoded, resampled
from daemon.audio.pcm import to_int16
from daemon.audio.wav import streaming_header
from daemon.errors import FastvoiceError
from daemon.speech import captions
from daemon.text.ssml import is_ssml
from daemon.voices.base import SpeechOptions

# Sent as they are made; the other formats are encoded whole, so their audio is made whole too
# (the decoder's largest windows: no small first window, no context decoded twice).
STREAMED_FORMATS = ("wav", "pcm")


def _checked(ports: HttpPorts, text: str, voice: str | None, response_format: str) -> str:
    """The voice's name; a bad format, text or voice is refused before any audio."""
    if response_format not in MEDIA_TYPES:
        supported = ", ".join(MEDIA_TYPES)
        raise HttpError(400, f"response_format {response_format!r}: no encoder here ({supported})")
    try:
        return ports.door.check(text, voice)
    except FastvoiceError as error:
        raise speech_refused(error) from None


async def rendered(
    ports: HttpPorts,
    text: str,
    voice: str | None,
    response_format: str,
    speed: float,
    output_rate: int | None = None,
) -> Response:
    """The audio of `text` in a format (at `output_rate`, resampled, where given); a bad text
    or voice is refused before any audio."""
    name = _checked(ports, text, voice, response_format)
    door = ports.door
    rate = door.voice_info(name).sample_rate
    streamed = response_format in STREAMED_FORMATS
    blocks = door.render(text, name, SpeechOptions(rate=speed), streamed=streamed)
    if output_rate is not None and output_rate != rate:
        blocks, rate = resampled(blocks, rate, output_rate), output_rate
    if streamed:
        producer = _OwnThread(blocks)
        try:
            first = await producer.next()  # text with nothing to say is refused here, unsent
        except FastvoiceError as error:
            await producer.close()
            raise speech_refused(error) from None

        async def stream() -> AsyncIterator[bytes]:
            try:
                if response_format == "wav":
                    yield streaming_header(rate)
                block = first
                while block is not None:
                    yield to_int16(block).tobytes()
                    block = await producer.next()
            finally:  # also when the client went away mid-stream
                await producer.close()

        headers = {"X-Sample-Rate": str(rate)}
        return StreamingResponse(stream(), media_type=MEDIA_TYPES[response_format], headers=headers)
    encoded = await _whole(blocks, rate, response_format)
    return Response(encoded, media_type=MEDIA_TYPES[response_format])


async def captioned(
    ports: HttpPorts,
    text: str,
    voice: str | None,
    response_format: str,
    speed: float,
    captions_format: str,
    output_rate: int | None = None,
) -> Response:
    """The audio of `text` (base64, whole, at `output_rate` where given) and its captions from
    the same synthesis, in one JSON answer: the words' times are those of this audio."""
    name = _checked(ports, text, voice, response_format)
    door = ports.door
    if not door.times_words(name):
        raise HttpError(400, f"voice {name!r} gives no word timings for captions")
    rate = door.voice_info(name).sample_rate
    clock = door.word_clock(rate)
    blocks = door.render(text, name, SpeechOptions(rate=speed), clock=clock, streamed=False)
    if output_rate is not None and output_rate != rate:
        blocks, rate = resampled(blocks, rate, output_rate), output_rate
    encoded = await _whole(blocks, rate, response_format)
    track = captions.cues(None if is_ssml(text) else text, clock.words)
    return JSONResponse(
        {
            "audio_base64": base64.b64encode(encoded).decode("ascii"),
            "response_format": response_format,
            "sample_rate": rate,
            "captions_format": captions_format,
            "captions": captions.rendered(track, captions_format),
            "words": [cue.as_dict() for cue in track],
        }
    )


async def _whole(blocks: Iterator[np.ndarray], rate: int, response_format: str) -> bytes:
    """The whole audio in an encoded format (PCM: raw 16-bit samples)."""
    try:
        audio = await asyncio.to_thread(lambda: np.concatenate([np.zeros(0, np.float32), *blocks]))
    except FastvoiceError as error:
        raise speech_refused(error) from None
    try:
        return await asyncio.to_thread(encoded, audio, rate, response_format)
    except (ImportError, EncodingError) as error:
        message = f"response_format {response_format!r}: this box cannot encode it ({error})"
        raise HttpError(501, message) from None


class _OwnThread:
    """A request's audio made on a thread of its own, so that a client leaving mid-stream gets
    its generator closed there, after the block being made: its admission place comes back at
    once, not whenever the garbage collector finds the generator."""

    def __init__(self, blocks: Iterator[np.ndarray]) -> None:
        self.blocks = blocks
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="http-audio")

    async def next(self) -> np.ndarray | None:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, next, self.blocks, None)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.shield(loop.run_in_executor(self.executor, self.blocks.close))
        finally:
            self.executor.shutdown(wait=False)
