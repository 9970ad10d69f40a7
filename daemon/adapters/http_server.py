"""The HTTP interface on its own thread and event loop (uvicorn), beside MQTT: nothing it does
blocks the broker's loop, and synthesis runs in the loop's thread pool.

Uvicorn bounds what a client can hold: connections (`limit_concurrency`, beyond which it answers
503 at once), idle keep-alive and header time; bodies are bounded by the routes themselves.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.adapters.http_common import HttpPorts

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 2048  # beyond this, 503 at once: a storm must not exhaust file descriptors
KEEP_ALIVE_S = 5
GRACEFUL_STOP_S = 3
STOP_LIMIT_S = 10


class HttpServer(threading.Thread):
    def __init__(self, address: tuple[str, int], ports: HttpPorts) -> None:
        super().__init__(name="http", daemon=True)
        self.address = address
        self.ports = ports
        self.ready = threading.Event()
        self.error: str | None = None
        self._server = None

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        import uvicorn

        from daemon.adapters.http_api import build_app

        host, port = self.address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError as error:
            listener.close()
            self.error = f"http: cannot listen on {host}:{port}: {error.strerror or error}"
            self.ready.set()
            return
        listener.listen(128)
        self.ports.watchers.loop = asyncio.get_running_loop()
        config = uvicorn.Config(
            build_app(self.ports),
            log_level="warning",
            lifespan="off",
            access_log=False,
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_S,
            # An event stream stays open as long as its page does: a stop waits this long.
            timeout_graceful_shutdown=GRACEFUL_STOP_S,
            server_header=False,
        )
        self._server = uvicorn.Server(config)
        log.info("http: serving on %s:%d", host, port)
        self.ready.set()
        await self._server.serve(sockets=[listener])

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self.join(timeout=STOP_LIMIT_S)
        if self.is_alive():
            log.error("http: still serving %g s after the stop; leaving it", STOP_LIMIT_S)
