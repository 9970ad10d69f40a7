"""What the HTTP routes share: their errors, what they act on (the front door MQTT uses too), the
job events handed to the HTTP loop, and how a request body is read (bounded in size and time)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from daemon.errors import FastvoiceError, http_status, reason_code
from daemon.events import ENDS, Refusal
from daemon.service.commands import CommandError, UnreadablePayload
from daemon.service.front_door import FrontDoor
from daemon.service.metrics import Metrics

BODY_TIMEOUT_S = 10.0  # a body that trickles in slower than this is cut off
WAIT_LIMIT_S = 600.0  # `?wait=true`: the longest a request waits for its job's end


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


def refused(reason: str, message: str, **extra: Any) -> HttpError:
    """A request refused for a reason, with the status every route gives it (the reason's, in
    daemon.errors.REASONS: the same on every interface); the body names the reason."""
    return HttpError(http_status(reason), message, reason=reason, **extra)


def job_refused(refusal: Refusal, **extra: Any) -> HttpError:
    """A job the front door did not accept, answered by the reason of its `rejected` event."""
    return refused(refusal.reason, refusal.message, **extra)


def speech_refused(error: FastvoiceError) -> HttpError:
    """A request's speech refused (its text, voice or sound: the reason every interface
    reports for it), or the box's failure to make it (500), named."""
    return refused(reason_code(error), str(error))


def ended_answer(ended: dict[str, Any], **extra: Any) -> Response:
    """`?wait=true`: the event that ended the job; a job refused or failed for what the
    request asked (its reason a 4xx) is answered with that status, as a refusal at once is."""
    reason = ended.get("reason")
    failed = ended.get("event") in ("failed", "rejected") and isinstance(reason, str)
    if failed and http_status(reason) < 500:
        fields = {key: value for key, value in {**ended, **extra}.items() if key != "message"}
        raise HttpError(http_status(reason), ended.get("message") or reason, **fields)
    return JSONResponse({**ended, **extra})


@dataclass
class HttpPorts:
    """What the routes act on: the front door every interface uses, the service's status."""

    door: FrontDoor
    status: Callable[[], dict[str, Any]]
    metrics: Metrics
    token: str | None
    watchers: EventWatchers = field(default_factory=lambda: EventWatchers())
    # The threads the answers' audio is made on (each waits its turn at the synthesizer).
    renders: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(8, thread_name_prefix="http-render")
    )


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
