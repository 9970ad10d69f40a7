"""A Wyoming TTS server (Home Assistant's voice protocol), on its own thread and event loop.

`describe` → `info` with our voices; `synthesize` → `audio-start`, `audio-chunk`s as each piece
of audio is made, `audio-stop`; the streaming form (`synthesize-start`, `-chunk`s, `-stop`)
speaks each complete sentence as soon as its text has arrived and ends with
`synthesize-stopped`. Synthesis runs in the loop's thread pool, so clients are served side by
side by the synthesizer's parallel workers, as many at once as there are workers (the
synthesizer's one limit, shared with HTTP; first come first served): more would only share the
same cores, and every one would end late. Bad requests get an `error` event naming the
problem, and the connection stays open.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from daemon.adapters.wyoming_speech import WyomingSpeech
from daemon.service.front_door import FrontDoor

log = logging.getLogger(__name__)


class WyomingServer(threading.Thread):
    def __init__(self, uri: str, door: FrontDoor) -> None:
        """As many requests are synthesized at once as the synthesizer admits, the others wait
        their turn; what one client event may carry is bounded by `queue.max_payload_bytes`, as
        MQTT commands are."""
        super().__init__(name="wyoming", daemon=True)
        self.uri = uri
        self.speech = WyomingSpeech(door)
        self.ready = threading.Event()
        self.error: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        from wyoming.server import AsyncServer

        from daemon.adapters.wyoming_connection import WyomingConnection

        self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
        server = AsyncServer.from_uri(self.uri)
        try:
            await server.start(
                lambda reader, writer: WyomingConnection(reader, writer, self.speech)
            )
        except OSError as error:
            self.error = f"wyoming: cannot listen on {self.uri}: {error.strerror or error}"
            self.ready.set()
            return
        log.info("wyoming: serving on %s", self.uri)
        self.ready.set()
        await self._stopped.wait()
        await server.stop()

    def shutdown(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self.join(timeout=10)
