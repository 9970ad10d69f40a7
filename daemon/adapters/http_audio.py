"""A request to an HTTP audio response, for every route that answers with speech: WAV and PCM
stream as they are made, FLAC, MP3 and Opus are encoded whole by libsndfile (soundfile). The
audio is made on the routes' render threads and handed to the response (a client that goes
away stops it at its next block); at most as many requests at once as the service has workers
(the synthesizer's one limit, shared with Wyoming)."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
from starlette.responses import JSONResponse, Response, StreamingResponse

from daemon.adapters.http_common import HttpError, HttpPorts, speech_refused
from daemon.audio.encoding import MEDIA_TYPES, EncodingError, encoded, resampled
from daemon.audio.pcm import to_int16
from daemon.audio.sinks.handoff import Handoff
from daemon.audio.wav import streaming_header
from daemon.errors import FastvoiceError
from daemon.service.commands import SayCommand
from daemon.speech import captions
from daemon.speech.rendering import Rendering
from daemon.text.ssml import is_ssml

# Sent as they are made; the other formats are encoded whole, so their audio is made whole too
# (the decoder's largest windows: no small first window, no context decoded twice).
STREAMED_FORMATS = ("wav", "pcm")


def _render(
    ports: HttpPorts, request: SayCommand, response_format: str, streamed: bool
) -> Rendering:
    """The request's render (`streamed`: sent as it is made); a bad format, text or voice is
    refused before any audio."""
    if response_format not in MEDIA_TYPES:
        supported = ", ".join(MEDIA_TYPES)
        raise HttpError(400, f"response_format {response_format!r}: no encoder here ({supported})")
    try:
        return ports.door.render(request, streamed=streamed)
    except FastvoiceError as error:
        raise speech_refused(error) from None


async def _started(ports: HttpPorts, rendering: Rendering, output_rate: int | None) -> Handoff:
    """The render handed to this request at `output_rate` (resampled where given), once its
    first block is made: text with nothing to say is refused then, before any answer."""
    blocks, rate = rendering.blocks, rendering.rate
    if output_rate is not None and output_rate != rate:
        blocks, rate = resampled(blocks, rate, output_rate), output_rate
    handoff = Handoff(blocks, rate, ports.renders)
    try:
        await handoff.peek()
    except FastvoiceError as error:
        await handoff.close()
        raise speech_refused(error) from None
    return handoff


async def rendered(
    ports: HttpPorts, request: SayCommand, response_format: str, output_rate: int | None = None
) -> Response:
    """The audio of `request` in a format, at `output_rate` where given (resampled)."""
    rendering = _render(ports, request, response_format, response_format in STREAMED_FORMATS)
    rate = output_rate or rendering.rate
    handoff = await _started(ports, rendering, output_rate)
    if response_format in STREAMED_FORMATS:

        async def stream():
            try:
                if response_format == "wav":
                    yield streaming_header(rate)
                while (block := await handoff.next()) is not None:
                    yield to_int16(block).tobytes()
            finally:  # also when the client went away mid-stream
                await handoff.close()

        headers = {"X-Sample-Rate": str(rate)}
        return StreamingResponse(stream(), media_type=MEDIA_TYPES[response_format], headers=headers)
    body = await _whole(ports, handoff, rate, response_format)
    return Response(body, media_type=MEDIA_TYPES[response_format])


async def captioned(
    ports: HttpPorts,
    request: SayCommand,
    response_format: str,
    captions_format: str,
    output_rate: int | None = None,
) -> Response:
    """The audio of `request` (base64, whole, at `output_rate` where given) and its captions
    from the same synthesis, in one JSON answer: the words' times are those of this audio."""
    rendering = _render(ports, request, response_format, streamed=False)
    if not ports.door.times_words(rendering.voice):
        rendering.blocks.close()
        raise HttpError(400, f"voice {rendering.voice!r} gives no word timings for captions")
    rate = output_rate or rendering.rate
    handoff = await _started(ports, rendering, output_rate)
    body = await _whole(ports, handoff, rate, response_format)
    written = None if is_ssml(request.text) else request.text
    track = captions.cues(written, rendering.clock.words)
    return JSONResponse(
        {
            "audio_base64": base64.b64encode(body).decode("ascii"),
            "response_format": response_format,
            "sample_rate": rate,
            "captions_format": captions_format,
            "captions": captions.rendered(track, captions_format),
            "words": [cue.as_dict() for cue in track],
        }
    )


async def _whole(ports: HttpPorts, handoff: Handoff, rate: int, response_format: str) -> bytes:
    """The whole audio in an encoded format (PCM: raw 16-bit samples)."""
    blocks = [np.zeros(0, np.float32)]
    try:
        while (block := await handoff.next()) is not None:
            blocks.append(block)
    except FastvoiceError as error:
        raise speech_refused(error) from None
    finally:
        await handoff.close()
    loop = asyncio.get_running_loop()
    audio = np.concatenate(blocks)
    try:
        return await loop.run_in_executor(ports.renders, encoded, audio, rate, response_format)
    except (ImportError, EncodingError) as error:
        message = f"response_format {response_format!r}: this box cannot encode it ({error})"
        raise HttpError(501, message) from None
