"""`POST /api/say/stream`: a job whose text comes in a chunked body, as an assistant's answer
comes token by token. Its complete sentences are spoken as they arrive and the rest is held;
gaps are waited out up to `http.stream_idle_s`. The whole answer is one job, played on one
stream, so music ducked by the sound server stays ducked across its gaps.

The job's other fields are the query's (`?voice=…&priority=high`), as in the `say` schema.
"""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from daemon.adapters.http_common import (
    WAIT_LIMIT_S,
    HttpError,
    HttpPorts,
    ended_answer,
    job_refused,
    refused,
    speech_refused,
    unreadable,
)
from daemon.errors import FastvoiceError
from daemon.service.commands import CommandError, SayCommand, check_reply_topic, parse_say
from daemon.service.text_feed import TextFeed
from daemon.text.trickle import TextTrickle

STRING_FIELDS = {"id", "voice", "chime", "reply_topic"}


def _fields(query: QueryParams) -> dict[str, Any]:
    """The job's fields from the query: numbers and true/false as such, the rest as text."""
    fields: dict[str, Any] = {}
    for key, value in query.items():
        if key == "wait":
            continue
        if key == "text":
            raise HttpError(422, "text: it comes in the body, not the query")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        keep = key in STRING_FIELDS or not isinstance(parsed, int | float | bool)
        fields[key] = value if keep else parsed
    if fields.get("at") is not None or fields.get("sync"):
        raise HttpError(422, "at, sync: a streamed answer cannot be timed, its length is unknown")
    return fields


class _StreamedJob:
    """One request's job: submitted with its first complete sentences, fed the rest."""

    def __init__(self, ports: HttpPorts, fields: dict[str, Any]) -> None:
        self.ports = ports
        self.fields = fields
        self.feed = TextFeed()
        self.command: SayCommand | None = None
        self.ended: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.characters = 0
        self.blank = ""  # what came before any text to say: spaces, line ends

    def check(self, text: str) -> SayCommand:
        config = self.ports.door.config
        payload = json.dumps({**self.fields, "text": text}).encode()
        try:
            command = parse_say(payload, len(payload))
            check_reply_topic(command, config.mqtt.base_topic, config.mqtt.reply_topic_prefixes)
        except CommandError as error:
            raise unreadable(error) from None
        return command

    async def speak(self, text: str) -> bool:
        """Hands `text` to the job (submitting it with the first); False once the job ended."""
        if not text.strip():
            if self.command is None:
                self.blank += text
            return True
        self.check_length(len(text))
        self.characters += len(text)
        if self.command is not None:
            return self.feed.put(text) and not self.ended.done()
        self.command = self.check(text)
        self.ports.watchers.waiting[self.command.id] = self.ended
        refused = await asyncio.to_thread(self.ports.door.submit, self.command, False, self.feed)
        if refused is not None:
            raise job_refused(refused, id=self.command.id)
        return True

    def check_length(self, more: int) -> None:
        """Refused (bad_text, as a text sent whole is) when `more` characters would take the
        text above `text.max_chars`."""
        limit = self.ports.door.config.text.max_chars
        if self.characters + more > limit:
            message = f"the text is above the maximum {limit} characters (text.max_chars)"
            raise refused("bad_text", message, **self.so_far)

    @property
    def so_far(self) -> dict[str, Any]:
        job = {} if self.command is None else {"id": self.command.id}
        return {**job, "characters": self.characters}

    def forget(self) -> None:
        """No more waiting for its end (the response is made)."""
        if self.command is not None:
            self.ports.watchers.waiting.pop(self.command.id, None)


async def _pieces(request: Request, idle_s: float) -> AsyncIterator[str | None]:
    """The body's text as it arrives; None when nothing came for `idle_s` (the sender is
    taken to be done)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    chunks = request.stream().__aiter__()
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(anext(chunks), idle_s)
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError:
                yield None
                return
            yield decoder.decode(chunk)
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        raise HttpError(400, f"the body is not UTF-8 text (byte {error.start})") from None


async def streamed_say(ports: HttpPorts, request: Request) -> Response:
    job = _StreamedJob(ports, _fields(request.query_params))
    job.check("…")  # the query's fields refused before the client sends its answer
    try:
        ports.door.voice_info(job.fields.get("voice"))
    except FastvoiceError as error:
        raise speech_refused(error) from None
    try:
        ended_by = await _read_into(job, request)
        if job.command is None:  # refused as the same text sent whole is (bad_text)
            try:
                await asyncio.to_thread(ports.door.check, job.check(job.blank))
            except FastvoiceError as error:
                raise speech_refused(error) from None
            raise HttpError(422, "text: no text came in the body")
        answer = {**job.so_far, "text_ended_by": ended_by}
        if job.ended.done():
            return ended_answer(job.ended.result(), **answer)
        if request.query_params.get("wait") not in ("1", "true", "yes"):
            return JSONResponse({"event": "queued", **answer}, status_code=202)
        try:
            ended = await asyncio.wait_for(job.ended, WAIT_LIMIT_S)
        except asyncio.TimeoutError:
            raise HttpError(504, "the job did not end in time", id=job.command.id) from None
        return ended_answer(ended, **answer)
    finally:
        job.forget()


async def _read_into(job: _StreamedJob, request: Request) -> str:
    """Reads the body into the job, sentence by sentence; says what ended the text."""
    config = job.ports.door.config
    trickle = TextTrickle(config.text.max_sentence_chars)
    ended_by = "the end of the body"
    try:
        async for piece in _pieces(request, config.http.stream_idle_s):
            if piece is None:
                ended_by = f"nothing came for {config.http.stream_idle_s:g} s"
                break
            trickle.add(piece)
            job.check_length(len(trickle.held))  # SSML is held whole: bounded here too
            if not await job.speak(trickle.ready()):
                return "the job ended"
        await job.speak(trickle.rest())
    finally:
        job.feed.end()
    return ended_by
