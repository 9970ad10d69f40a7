"""OpenAI's `POST /v1/audio/speech` and `GET /v1/models`, on fastvoice's voices: what chat
front ends and scripts written for OpenAI's API call. Audio is rendered beside the queue (not
played), at most as many requests at once as the service has workers. WAV and PCM stream as
they are made; FLAC, MP3 and Opus are encoded whole by libsndfile (soundfile)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from daemon.audio.pcm import join_sentences, to_int16
from daemon.audio.wav import streaming_header
from daemon.errors import FastvoiceError
from daemon.validation import format_validation_error
from daemon.voices.base import SpeechOptions

if TYPE_CHECKING:
    from daemon.adapters.http_api import HttpPorts

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/L16",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
# libsndfile's container and codec of each encoded format; Opus takes only these rates.
ENCODED = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


class SpeechRequest(BaseModel):
    """OpenAI's request body; `model` is accepted whatever it names."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(max_length=200)
    input: str = Field(min_length=1)
    voice: str = Field(max_length=200, description="a fastvoice voice name (GET /v1/models)")
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus", "aac"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    instructions: str | None = Field(None, max_length=0, description="not supported: empty")
    stream_format: Literal["audio"] | None = None


async def speech(ports: HttpPorts, request: Request) -> Response:
    from daemon.adapters.http_api import HttpError, read_body

    body = await read_body(request, ports.settings.config.http.max_body_bytes)
    try:
        asked = SpeechRequest.model_validate_json(body)
    except ValidationError as error:
        raise HttpError(400, format_validation_error(error, noun="field")) from None
    return await rendered(ports, asked.input, asked.voice, asked.response_format, asked.speed)


async def models(ports: HttpPorts, request: Request) -> Response:
    names = ports.synthesizer.voices.names
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "fastvoice"} for name in names
    ]
    return JSONResponse({"object": "list", "data": data})


async def voices(ports: HttpPorts, request: Request) -> Response:
    """The voices the `voice` field takes (installed ones included), with their languages and
    speakers: the list OpenAI-compatible speech servers offer at this path."""
    registry = ports.synthesizer.voices

    def described() -> list[dict]:
        listed = []
        for name in registry.names:
            info = registry.get(name).info
            listed.append(
                {
                    "id": name,
                    "name": name,
                    "language": info.language,
                    "speakers": list(info.speakers),
                    "default": name == registry.default,
                }
            )
        return listed

    return JSONResponse({"object": "list", "voices": await asyncio.to_thread(described)})


async def rendered(
    ports: HttpPorts, text: str, voice: str | None, response_format: str, speed: float
) -> Response:
    """The audio of `text` in a format; a bad text or voice is refused before any audio."""
    from daemon.adapters.http_api import HttpError

    if response_format not in MEDIA_TYPES:
        supported = ", ".join(MEDIA_TYPES)
        raise HttpError(400, f"response_format {response_format!r}: no encoder here ({supported})")
    synthesizer = ports.synthesizer
    try:
        name = synthesizer.voices.require(voice)
        synthesizer.script(text, name)  # refused here, before a status line is sent
    except FastvoiceError as error:
        raise HttpError(400, str(error)) from None
    rate = synthesizer.voices.get(name).info.sample_rate
    blocks = _blocks(ports, text, name, speed, rate)
    if response_format in ("wav", "pcm"):
        producer = _OwnThread(blocks)
        first = await producer.next()

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
    audio = await asyncio.to_thread(lambda: np.concatenate([np.zeros(0, np.float32), *blocks]))
    try:
        encoded = await asyncio.to_thread(_encoded, audio, rate, response_format)
    except (ImportError, RuntimeError, ValueError, TypeError) as error:
        message = f"response_format {response_format!r}: this box cannot encode it ({error})"
        raise HttpError(501, message) from None
    return Response(encoded, media_type=MEDIA_TYPES[response_format])


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


def _blocks(ports: HttpPorts, text: str, voice: str, speed: float, rate: int) -> Iterator[Any]:
    """Audio blocks as `fastvoice say` joins them, made while holding an admission place."""
    audio = ports.settings.config.audio
    with ports.admission:
        pieces = ports.synthesizer.synthesize(text, voice, SpeechOptions(rate=speed))
        yield from join_sentences(pieces, rate, audio.sentence_pause_s, audio.fade_ms)


def _encoded(audio: np.ndarray, rate: int, response_format: str) -> bytes:
    import soundfile

    container, codec = ENCODED[response_format]
    if response_format == "opus" and rate not in OPUS_RATES:
        import soxr

        audio, rate = soxr.resample(audio, rate, 48000), 48000
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format=container, subtype=codec)
    return buffer.getvalue()
