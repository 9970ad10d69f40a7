"""The service's end of the local socket (`daemon.local_socket`): `fastvoice say` on this box
queues its job here, with the others, and hears its events back.

One thread accepts, one thread per connection reads the request and writes what the job's
events and audio put on that connection's queue (events come from the threads that emit them;
they never wait on a slow client). Access is what the socket file allows: the service's user
and group (0660, in a directory the unit makes 0750).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
from pathlib import Path
from typing import Any

from daemon.events import ENDS
from daemon.local_socket import VERSION
from daemon.service.commands import CommandError, SayCommand, parse_say
from daemon.service.front_door import FrontDoor

log = logging.getLogger(__name__)

Outgoing = tuple[dict[str, Any], bytes | None]  # a message, and the bytes that follow it
REQUEST_TIMEOUT_S = 5.0


class LocalServer(threading.Thread):
    def __init__(self, path: Path, door: FrontDoor, reply_prefix: str) -> None:
        """`reply_prefix`: the reply topic under which jobs that want their audio back publish
        it; what is published there comes to the client instead of the broker. A request may
        carry `queue.max_payload_bytes` of the config in force."""
        super().__init__(name="local-socket", daemon=True)
        self.path = path
        self.door = door
        self.reply_prefix = reply_prefix.rstrip("/") + "/"
        self._clients: dict[str, queue.Queue[Outgoing]] = {}
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.problem: str | None = None

    def listen(self) -> bool:
        """Binds the socket (replacing a stale one); False, with `problem` set, if it cannot."""
        try:
            self.path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            if self.path.is_socket():
                self.path.unlink()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(self.path))
            os.chmod(self.path, 0o660)
            listener.listen(16)
        except OSError as error:
            self.problem = f"local socket {self.path}: {error.strerror or error}"
            return False
        self._listener = listener
        return True

    def run(self) -> None:
        assert self._listener is not None
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed by shutdown()
            threading.Thread(
                target=self._serve, args=(connection,), name="local-client", daemon=True
            ).start()

    def shutdown(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self.path.unlink(missing_ok=True)

    # --- from the service's threads ---

    def on_event(self, message: dict[str, Any]) -> None:
        with self._lock:
            outbox = self._clients.get(message.get("id") or "")
        if outbox is not None:
            outbox.put((message, None))

    def deliver(self, topic: str, payload: bytes | str) -> bool:
        """Takes audio published to a local client's reply topic; False for any other topic."""
        if not topic.startswith(self.reply_prefix):
            return False
        with self._lock:
            outbox = self._clients.get(topic[len(self.reply_prefix) :])
        if outbox is not None:
            data = payload.encode() if isinstance(payload, str) else payload
            outbox.put(({"v": VERSION, "audio": "wav", "bytes": len(data)}, data))
        return True

    # --- one connection ---

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(REQUEST_TIMEOUT_S)
            try:
                command = self._read_request(connection)
            except CommandError as error:
                rejected = {"v": 1, "event": "rejected", "id": error.job_id, "reason": "invalid"}
                _send(connection, {**rejected, "message": str(error)})
                return
            except OSError:
                return
            connection.settimeout(None)
            outbox: queue.Queue[Outgoing] = queue.Queue()
            with self._lock:
                if command.id in self._clients:
                    message = "this id is being followed by another local client"
                    rejected = {"v": 1, "event": "rejected", "id": command.id}
                    _send(connection, {**rejected, "reason": "duplicate", "message": message})
                    return
                self._clients[command.id] = outbox
            try:
                self.door.submit(command)  # a refusal arrives as a `rejected` event
                self._relay(connection, outbox)
            finally:
                with self._lock:
                    del self._clients[command.id]

    def _read_request(self, connection: socket.socket) -> SayCommand:
        max_bytes = self.door.config.queue.max_payload_bytes
        with connection.makefile("rb") as stream:
            line = stream.readline(max_bytes + 1)
        if len(line) > max_bytes:
            raise CommandError(f"request is above the maximum {max_bytes} bytes")
        try:
            request = json.loads(line)
        except ValueError:
            raise CommandError("the request is not a JSON line") from None
        if not isinstance(request, dict) or request.get("v") != VERSION:
            raise CommandError(f'the request must be a JSON object with "v": {VERSION}')
        unknown = set(request) - {"v", "say", "audio"}
        if unknown:
            raise CommandError(f"unknown request fields {sorted(unknown)}")
        say = request.get("say")
        if not isinstance(say, dict):
            raise CommandError('"say" must be a JSON object (the say schema)')
        if request.get("audio") not in (None, "wav"):
            raise CommandError('"audio" must be "wav" or null')
        command = parse_say(json.dumps(say).encode(), max_bytes)
        if command.output != "play":
            raise CommandError('a local job plays, or asks for its audio with "audio": "wav"')
        if request.get("audio") == "wav":
            update = {"output": "publish", "format": "wav"}
            reply_topic = self.reply_prefix + command.id
            command = command.model_copy(update={**update, "reply_topic": reply_topic})
        return command

    @staticmethod
    def _relay(connection: socket.socket, outbox: queue.Queue[Outgoing]) -> None:
        """Writes the job's messages until one ends it; a client that went away stops the
        writing, never the job (it was accepted)."""
        while True:
            message, data = outbox.get()
            try:
                _send(connection, message, data)
            except OSError:
                return
            if message.get("event") in ENDS and not message.get("will_resume"):
                return


def _send(connection: socket.socket, message: dict[str, Any], data: bytes | None = None) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n" + (data or b""))
