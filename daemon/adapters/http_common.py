"""What the HTTP routes share: their errors, what they act on (the front door MQTT uses too), the
job events handed to the HTTP loop, and how a request body is read (bounded in size and time)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from daemon.errors import FastvoiceError, reason_code
from daemon.events import ENDS, Refusal
from daemon.service.commands import CommandError, UnreadablePayload
from daemon.service.front_door import FrontDoor
from daemon.service.metrics import Metrics

BODY_TIMEOUT_S = 10.0  # a body that trickles in slower than this is cut off
WAIT_LIMIT_S = 600.0  # `?wait=true`: the longest a request waits for its job's end
# The status of each reason a request is refused for (the reasons of MQTT's `rejected` and
# `failed` events), the same on every route: what it asks for cannot be spoken (400), its id
# was taken already (409), the queue is full (503: the same request may be taken later). Any
# other reason is the box's failure, not the request's (500).
STATUS_OF_REASON = {
    "invalid": 400,
    "bad_text": 400,
    "bad_voice": 400,
    "bad_sound": 400,
    "duplicate": 409,
    "queue_full": 503,
}


class HttpError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def unreadable(error: CommandError, about: str = "") -> HttpError:
    """A body the route cannot take: 400 where it is not in the form asked for (UTF-8, a JSON
    object), 422 where its fields are wrong. `about`: what the message is about ("stop")."""
    status = 400 if isinstance(error, UnreadablePayload) else 422
    return HttpError(status, f"{about}: {error}" if about else str(error))


def job_refused(refusal: Refusal, **extra: Any) -> HttpError:
    """A job the front door did not accept, answered by the reason of its `rejected` event."""
    return HttpError(STATUS_OF_REASON.get(refusal.reason, 500), refusal.message, **extra)


def speech_refused(error: FastvoiceError) -> HttpError:
    """A request's speech refused (its text, voice or sound: the reason every interface
    reports for it), or the box's failure to make it (500), named."""
    return HttpError(STATUS_OF_REASON.get(reason_code(error), 500), str(error))


@dataclass
class HttpPorts:
    """What the routes act on: the front door every interface uses, the service's status."""

    door: FrontDoor
    status: Callable[[], dict[str, Any]]
    metrics: Metrics
    token: str | None
    watchers: EventWatchers = field(default_factory=lambda: EventWatchers())


class EventWatchers:
    """Job events handed from the service's threads to the HTTP loop: for `?wait=true` and the
    Server-Sent Events stream."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.streams: set[asyncio.Queue[dict[str, Any]]] = set()
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def on_event(self, message: dict[str, Any]) -> None:
        """An EventSink listener (called on the service's threads)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._deliver, message)

    def _deliver(self, message: dict[str, Any]) -> None:
        for stream in list(self.streams):
            if stream.qsize() < 1000:  # a client that does not read loses events, not memory
                stream.put_nowait(message)
        waiter = self.waiting.get(message.get("id") or "")
        ended = message["event"] in ENDS and not message.get("will_resume")
        if waiter is not None and ended and not waiter.done():
            waiter.set_result(message)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused (413) past `limit` bytes and (408) when it trickles in too slowly."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"the body is {declared} bytes, above the maximum {limit}")
    chunks: list[bytes] = []
    size = 0

    async def collect() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"the body is above the maximum {limit} bytes")
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise HttpError(408, f"the body did not arrive within {BODY_TIMEOUT_S:g} s") from None
    return b"".join(chunks)
