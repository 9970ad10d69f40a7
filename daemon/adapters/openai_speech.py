"""OpenAI's `POST /v1/audio/speech`, `GET /v1/models` and `GET /v1/audio/voices`, on fastvoice's
voices: what chat front ends and scripts written for OpenAI's API call. Only OpenAI's request
shape lives here; daemon.adapters.http_audio renders the audio beside the queue (not played).

As OpenAI documents it: `pcm` is 24 kHz 16-bit mono (resampled from the voice's rate; fastvoice's
own `sample_rate` field asks for another rate, in every format), its voice
names are taken where `http.voice_aliases` maps them, and `instructions` is taken; no voice here
follows instructions yet, so the answer's `X-Instructions` header says it was ignored."""

from __future__ import annotations

import asyncio
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from daemon.adapters.http_audio import captioned, rendered
from daemon.adapters.http_common import HttpError, HttpPorts, read_body, unreadable
from daemon.service.commands import CommandError, SayCommand, say_request
from daemon.validation import format_validation_error


class SpeechRequest(BaseModel):
    """OpenAI's request body; `model` is accepted whatever it names."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(max_length=200)
    input: str = Field(description="the text (empty: refused as bad_text, as everywhere)")
    voice: str = Field(max_length=200, description="a fastvoice voice name (GET /v1/models)")
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus", "aac"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    instructions: str | None = Field(
        None, max_length=4096, description="how to speak; ignored by voices that cannot follow it"
    )
    stream_format: Literal["audio"] | None = None
    sample_rate: int | None = Field(
        None,
        ge=8000,
        le=48000,
        description="fastvoice's own: the audio at this rate (resampled with soxr); default: "
        "the voice's, and for pcm 24 kHz as OpenAI documents it",
    )


class CaptionedSpeechRequest(SpeechRequest):
    """OpenAI's request body, and the captions' format (fastvoice's own route)."""

    captions_format: Literal["vtt", "srt", "json"] = "vtt"


Asked = TypeVar("Asked", bound=SpeechRequest)


# OpenAI's raw PCM: 24 kHz, 16-bit, mono; clients assume it (no header says it).
PCM_RATE = 24_000


async def speech(ports: HttpPorts, request: Request) -> Response:
    asked = await _asked(ports, request, SpeechRequest)
    pcm_rate = PCM_RATE if asked.response_format == "pcm" else None
    output_rate = asked.sample_rate or pcm_rate
    response = await rendered(ports, _request(asked), asked.response_format, output_rate)
    _note_instructions(response, asked)
    return response


async def speech_with_captions(ports: HttpPorts, request: Request) -> Response:
    """The audio and its captions in one answer (both from one synthesis)."""
    asked = await _asked(ports, request, CaptionedSpeechRequest)
    response = await captioned(
        ports, _request(asked), asked.response_format, asked.captions_format, asked.sample_rate
    )
    _note_instructions(response, asked)
    return response


def _request(asked: SpeechRequest) -> SayCommand:
    """OpenAI's request as the one request every interface makes (its voice name may be an
    alias of `http.voice_aliases`: the front door maps it)."""
    try:
        return say_request(text=asked.input, voice=asked.voice, rate=asked.speed)
    except CommandError as error:
        raise unreadable(error) from None


def _note_instructions(response: Response, asked: SpeechRequest) -> None:
    if asked.instructions:
        response.headers["X-Instructions"] = "ignored: the voice cannot follow instructions"


async def _asked(ports: HttpPorts, request: Request, model: type[Asked]) -> Asked:
    body = await read_body(request, ports.door.config.http.max_body_bytes)
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        raise HttpError(400, format_validation_error(error, noun="field")) from None


async def models(ports: HttpPorts, request: Request) -> Response:
    names = ports.door.voice_names()
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "fastvoice"} for name in names
    ]
    return JSONResponse({"object": "list", "data": data})


async def voices(ports: HttpPorts, request: Request) -> Response:
    """The voices the `voice` field takes (installed ones included), with their languages and
    speakers: the list OpenAI-compatible speech servers offer at this path."""
    door = ports.door

    def described() -> list[dict]:
        return [
            {
                "id": info.name,
                "name": info.name,
                "language": info.language,
                "speakers": list(info.speakers),
                "default": info.name == door.default_voice,
            }
            for info in door.voices()
        ]

    return JSONResponse({"object": "list", "voices": await asyncio.to_thread(described)})
