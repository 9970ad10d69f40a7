"""The HTTP interface's routes: REST on the service's own queue and commands, the
OpenAI-compatible speech endpoint (daemon/adapters/openai_speech.py) and /metrics.

Imported only when `http.listen` is set (it imports Starlette). Every body is read with its size
and its arrival time bounded before it is parsed; every state change needs the bearer token
when one is configured.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from daemon.adapters import http_audio, http_streamed_say, openai_speech
from daemon.adapters.http_common import (
    WAIT_LIMIT_S,
    HttpError,
    HttpPorts,
    ended_answer,
    job_refused,
    read_body,
    unreadable,
)
from daemon.audio.encoding import MEDIA_TYPES
from daemon.audio.sounds import NO_SOUND
from daemon.service.commands import (
    CommandError,
    SayCommand,
    check_reply_topic,
    parse_json_model,
    parse_say,
    parse_stop,
    parse_volume,
    say_request,
)

READ_METHODS = ("GET", "HEAD", "OPTIONS")


class Routes:
    def __init__(self, ports: HttpPorts) -> None:
        self.ports = ports

    def _limit(self) -> int:
        return self.ports.door.config.http.max_body_bytes

    async def say(self, request: Request) -> Response:
        """Queues a job (the MQTT `say` schema); `?wait=true` answers when it has ended."""
        body = await read_body(request, self._limit())
        config = self.ports.door.config
        try:
            command = _say_command(request, body, self._limit())
            check_reply_topic(command, config.mqtt.base_topic, config.mqtt.reply_topic_prefixes)
        except CommandError as error:
            raise unreadable(error) from None
        wait = request.query_params.get("wait") in ("1", "true", "yes")
        waiter = None
        watchers = self.ports.watchers
        if wait:
            waiter = asyncio.get_running_loop().create_future()
            watchers.waiting[command.id] = waiter
        try:
            refused = await asyncio.to_thread(self.ports.door.submit, command)
            if refused is not None:
                raise job_refused(refused, id=command.id)
            if waiter is None:
                return JSONResponse({"id": command.id, "event": "queued"}, status_code=202)
            try:
                ended = await asyncio.wait_for(waiter, WAIT_LIMIT_S)
            except asyncio.TimeoutError:
                raise HttpError(504, "the job did not end in time", id=command.id) from None
            return ended_answer(ended)
        finally:
            watchers.waiting.pop(command.id, None)

    async def stop(self, request: Request) -> Response:
        body = await read_body(request, self._limit())
        try:
            command = parse_stop(body, self._limit())
        except CommandError as error:
            raise unreadable(error, "stop") from None
        if command.id is not None:
            if not self.ports.door.stop_job(command.id):
                raise HttpError(404, f"no job {command.id!r} is playing or queued")
            return JSONResponse({"stopped": command.id})
        self.ports.door.stop(everything=command.all)
        return JSONResponse({"stopped": "all" if command.all else "playing"})

    async def status(self, request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(self.ports.status))

    async def jobs(self, request: Request) -> Response:
        door = self.ports.door
        return JSONResponse({"jobs": door.jobs(), "paused": door.paused})

    async def volume(self, request: Request) -> Response:
        door = self.ports.door
        if request.method == "PUT":
            body = await read_body(request, self._limit())
            try:
                door.set_volume(parse_volume(body, self._limit()))
            except CommandError as error:
                raise unreadable(error, "volume") from None
        return JSONResponse({"volume": door.volume})

    async def voices(self, request: Request) -> Response:
        door = self.ports.door
        described = [info.as_dict() for info in door.voices()]
        broken = [voice.as_dict() for voice in door.broken_voices()]
        return JSONResponse({"default": door.default_voice, "voices": described, "broken": broken})

    async def sounds(self, request: Request) -> Response:
        """The chimes a say may name, and the default chime of each priority."""
        names = await asyncio.to_thread(self.ports.door.sound_names)
        defaults = self.ports.door.config.sounds.chime_by_priority
        return JSONResponse({"sounds": [*names, NO_SOUND], "by_priority": defaults})

    async def events(self, request: Request) -> Response:
        """Server-Sent Events: every job event, as published on MQTT."""
        watchers = self.ports.watchers
        stream: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        watchers.streams.add(stream)

        async def sent() -> AsyncIterator[bytes]:
            try:
                yield b": fastvoice events\n\n"
                while True:
                    try:
                        message = await asyncio.wait_for(stream.get(), 15)
                    except asyncio.TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    yield f"event: {message['event']}\ndata: {json.dumps(message)}\n\n".encode()
            finally:
                watchers.streams.discard(stream)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(sent(), media_type="text/event-stream", headers=headers)

    async def tts(self, request: Request) -> Response:
        """`GET /api/tts?text=…&voice=…&format=…&sample_rate=…`: the audio (WAV unless `format`
        names another), not played, not queued."""
        query = request.query_params
        text = query.get("text")
        if text is None:
            raise HttpError(422, "text: a query parameter `text` is required")
        rate = query.get("sample_rate")
        if rate is not None and not (rate.isdigit() and 8000 <= int(rate) <= 48000):
            raise HttpError(422, f"sample_rate: {rate!r} is not a rate from 8000 to 48000 Hz")
        output_rate = None if rate is None else int(rate)
        form = query.get("format", "wav")
        if form not in MEDIA_TYPES:
            raise HttpError(422, f"format: {form!r} is not one of {', '.join(MEDIA_TYPES)}")
        try:
            asked = say_request(text=text, voice=query.get("voice"))
        except CommandError as error:
            raise unreadable(error) from None
        return await http_audio.rendered(self.ports, asked, form, output_rate)

    async def metrics(self, request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(self.ports.metrics.scrape(), media_type=CONTENT_TYPE_LATEST)

    async def page(self, request: Request) -> Response:
        """The operator page: one self-contained file (no CDN, no fonts to fetch)."""
        from importlib.resources import files

        page = files("daemon.adapters").joinpath("operator_page.html").read_bytes()
        return Response(page, media_type="text/html; charset=utf-8")

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())


def _say_command(request: Request, body: bytes, limit: int) -> SayCommand:
    """A body declared JSON (by its Content-Type) must be the `say` object; any other is read
    as MQTT reads a `say` payload (JSON when it starts with `{`, else the text to say), so that
    a JSON `null` or `[1, 2, 3]` is refused, not spoken."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        return parse_json_model(SayCommand, body, limit)
    return parse_say(body, limit)


def openapi_document() -> dict[str, Any]:
    """The request schemas are the pydantic models the routes validate with."""
    say = SayCommand.model_json_schema(ref_template="#/components/schemas/{model}")
    speech = openai_speech.SpeechRequest.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    captioned = openai_speech.CaptionedSpeechRequest.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    schemas = {"SayCommand": say, "SpeechRequest": speech, "CaptionedSpeechRequest": captioned}
    for schema in (say, speech, captioned):
        schemas.update(schema.pop("$defs", {}))

    def body(name: str) -> dict[str, Any]:
        content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}
        return {"required": True, "content": content}

    ok = {"200": {"description": "OK"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "fastvoice", "version": "1"},
        "paths": {
            "/api/say": {"post": {"requestBody": body("SayCommand"), "responses": ok}},
            "/api/say/stream": {
                "post": {
                    "description": "text in a chunked body, spoken as its sentences arrive; "
                    "the job's other SayCommand fields in the query",
                    "requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                    "responses": ok,
                }
            },
            "/api/stop": {"post": {"responses": ok}},
            "/api/status": {"get": {"responses": ok}},
            "/api/jobs": {"get": {"responses": ok}},
            "/api/volume": {"get": {"responses": ok}, "put": {"responses": ok}},
            "/api/voices": {"get": {"responses": ok}},
            "/api/sounds": {"get": {"responses": ok}},
            "/api/events": {"get": {"responses": ok}},
            "/api/tts": {"get": {"responses": ok}},
            "/v1/audio/speech": {"post": {"requestBody": body("SpeechRequest"), "responses": ok}},
            "/v1/audio/speech/with-captions": {
                "post": {"requestBody": body("CaptionedSpeechRequest"), "responses": ok}
            },
            "/v1/models": {"get": {"responses": ok}},
            "/v1/audio/voices": {"get": {"responses": ok}},
            "/metrics": {"get": {"responses": ok}},
        },
        "components": {"schemas": schemas},
    }


def _authorised(request: Request, ports: HttpPorts) -> bool:
    token = ports.token
    if token is None:
        return True
    needs = request.method not in READ_METHODS or ports.door.config.http.require_token_for_reads
    if not needs:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())


# Over 60 lines: the route table, one route per line, and the two guards it uses.
def build_app(ports: HttpPorts) -> Starlette:
    routes = Routes(ports)

    def guarded(handler: Callable, openai_errors: bool) -> Callable:
        """The token checked first; errors as `{"error": message}` (with the `reason` of a
        refusal, as every interface names it), or in OpenAI's shape on its routes (its clients
        read `error.message`; `error.code` is the refusal's reason, else the status)."""

        def failure(status: int, message: str, **extra: Any) -> JSONResponse:
            body: dict[str, Any] = {"error": message, **extra}
            if openai_errors:
                kind = "invalid_request_error"
                if status == 401:
                    kind = "authentication_error"
                elif status >= 500:
                    kind = "server_error"
                code = extra.get("reason", status)
                body = {"error": {"message": message, "type": kind, "code": code}}
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            return JSONResponse(body, status_code=status, headers=headers)

        async def endpoint(request: Request) -> Response:
            if not _authorised(request, ports):
                return failure(401, "a bearer token is required (Authorization: Bearer …)")
            try:
                return await handler(request)
            except HttpError as error:
                return failure(error.status, str(error), **error.extra)

        return endpoint

    table = [
        ("/", routes.page, ["GET"]),
        ("/api/say", routes.say, ["POST"]),
        ("/api/say/stream", lambda r: http_streamed_say.streamed_say(ports, r), ["POST"]),
        ("/api/stop", routes.stop, ["POST"]),
        ("/api/status", routes.status, ["GET"]),
        ("/api/jobs", routes.jobs, ["GET"]),
        ("/api/volume", routes.volume, ["GET", "PUT"]),
        ("/api/voices", routes.voices, ["GET"]),
        ("/api/sounds", routes.sounds, ["GET"]),
        ("/api/events", routes.events, ["GET"]),
        ("/api/tts", routes.tts, ["GET"]),
        ("/v1/audio/speech", lambda r: openai_speech.speech(ports, r), ["POST"]),
        (
            "/v1/audio/speech/with-captions",
            lambda r: openai_speech.speech_with_captions(ports, r),
            ["POST"],
        ),
        ("/v1/models", lambda r: openai_speech.models(ports, r), ["GET"]),
        ("/v1/audio/voices", lambda r: openai_speech.voices(ports, r), ["GET"]),
        ("/metrics", routes.metrics, ["GET"]),
        ("/openapi.json", routes.openapi, ["GET"]),
    ]
    middleware = []
    origins = ports.door.config.http.cors_origins
    if origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["GET", "POST", "PUT"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    return Starlette(
        routes=[
            Route(path, guarded(handler, path.startswith("/v1/")), methods=methods)
            for path, handler, methods in table
        ],
        middleware=middleware,
    )
