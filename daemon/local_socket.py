"""`fastvoice say` on a box whose service is running: the job goes to the service's queue
through a Unix socket, so it waits its turn, keeps its priority and never fights the service for
the audio device. This module is the protocol (the socket's place and its framing) and the
client; `daemon.adapters.local_server` is the service's end.

The protocol, one connection per job: the client sends one JSON line
`{"v": 1, "say": {the say schema}, "audio": "wav" | null}`; the service answers with the job's
events as JSON lines (the same events as on MQTT) until one that ends the job, and, when the
client asked for the audio, one line `{"v": 1, "audio": "wav", "bytes": N}` followed by N bytes
of WAV before `finished`. Only the standard library is imported here: the client path of
`fastvoice say` must start in tens of milliseconds.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.events import ENDS

VERSION = 1
SOCKET_NAME = "fastvoice.sock"
ENV_SOCKET = "FASTVOICE_SOCKET"
# systemd's RuntimeDirectory=fastvoice for the system service.
SYSTEM_SOCKET = Path("/run/fastvoice") / SOCKET_NAME
CONNECT_TIMEOUT_S = 2.0


def service_socket_path() -> Path | None:
    """Where the service listens: $FASTVOICE_SOCKET, else systemd's RuntimeDirectory, else the
    user's runtime directory; None where there is none of these (no world-writable fallback)."""
    if os.environ.get(ENV_SOCKET):
        return Path(os.environ[ENV_SOCKET])
    if os.environ.get("RUNTIME_DIRECTORY"):
        return Path(os.environ["RUNTIME_DIRECTORY"].split(":")[0]) / SOCKET_NAME
    return _user_socket()


def client_socket_paths() -> list[Path]:
    """Where a client looks, in order: $FASTVOICE_SOCKET alone when set; else a service of
    this user's, then the system service."""
    if os.environ.get(ENV_SOCKET):
        return [Path(os.environ[ENV_SOCKET])]
    user = _user_socket()
    return [SYSTEM_SOCKET] if user is None else [user, SYSTEM_SOCKET]


def _user_socket() -> Path | None:
    """A service of the user's own, in their runtime directory."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "fastvoice" / SOCKET_NAME
    return None


class ServiceUnavailable(Exception):
    """No service took the job (none there, or it refused the connection); the caller speaks
    the text itself. The message says why, for a one-line note."""


@dataclass
class LocalResult:
    events: list[dict[str, Any]]
    audio: bytes | None

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1]


def read_frames(stream) -> Iterator[tuple[dict[str, Any], bytes | None]]:
    """(message, attached bytes) from a binary file object, until it ends."""
    while line := stream.readline():
        message = json.loads(line)
        size = message.get("bytes") if isinstance(message, dict) else None
        data = stream.read(size) if isinstance(size, int) and size >= 0 else None
        if data is not None and len(data) != size:
            raise ConnectionError("the service's answer was cut short")
        yield message, data


def hand_to_service(
    say: dict[str, Any],
    want_audio: bool,
    on_event: Callable[[dict[str, Any]], None],
    timeout_s: float,
) -> LocalResult:
    """Sends one job to the local service and follows it to its end. ServiceUnavailable when
    no service could be reached (nothing was queued)."""
    connection = _connect()
    with connection:
        request = {"v": VERSION, "say": say, "audio": "wav" if want_audio else None}
        connection.sendall(json.dumps(request).encode() + b"\n")
        connection.settimeout(timeout_s)
        events: list[dict[str, Any]] = []
        audio = None
        with connection.makefile("rb") as stream:
            try:
                for message, data in read_frames(stream):
                    if "audio" in message:
                        audio = data
                        continue
                    events.append(message)
                    on_event(message)
                    if message.get("event") in ENDS and not message.get("will_resume"):
                        return LocalResult(events, audio)
            except TimeoutError:
                raise ConnectionError(f"no end of the job after {timeout_s:g} s") from None
    if not events:
        raise ServiceUnavailable("the service closed the connection without an answer")
    raise ConnectionError("the service closed the connection before the job ended")


def _connect() -> socket.socket:
    problems = []
    for path in client_socket_paths():
        if not path.exists():
            continue
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection.connect(str(path))
        except OSError as error:
            connection.close()
            problems.append(f"{path}: {error.strerror or error}")
            continue
        return connection
    raise ServiceUnavailable("; ".join(problems))
