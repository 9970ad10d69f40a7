"""A Wyoming TTS server (Home Assistant's voice protocol), on its own thread and event loop.

`describe` → `info` with our voices; `synthesize` → `audio-start`, `audio-chunk`s as each piece
of audio is made, `audio-stop`; the streaming form (`synthesize-start`, `-chunk`s, `-stop`)
speaks each complete sentence as soon as its text has arrived and ends with
`synthesize-stopped`. Synthesis runs in the loop's thread pool, so clients are served side by
side by the synthesizer's parallel workers, as many at once as there are workers (`max_requests`,
first come first served): more would only share the same cores, and every one of them would end
late. Bad requests get an `error` event naming the problem, and the connection stays open.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import numpy as np

from daemon import __version__
from daemon.audio.pcm import join_sentences
from daemon.settings import Settings
from daemon.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions

log = logging.getLogger(__name__)


class WyomingServer(threading.Thread):
    def __init__(
        self, uri: str, synthesizer: Synthesizer, settings: Settings, max_requests: int = 1
    ) -> None:
        """`max_requests` requests are synthesized at once, the others wait their turn; what one
        client event may carry is bounded by `queue.max_payload_bytes`, as MQTT commands are."""
        super().__init__(name="wyoming", daemon=True)
        self.admission = threading.Semaphore(max_requests)
        self.uri = uri
        self.synthesizer = synthesizer
        self.settings = settings
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
            await server.start(lambda reader, writer: WyomingConnection(reader, writer, self))
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

    def info(self):
        from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

        attribution = Attribution(name="fastvoice", url="")
        voices = []
        for name in self.synthesizer.voices.names:
            info = self.synthesizer.voices.get(name).info
            voices.append(
                TtsVoice(
                    name=name,
                    description=f"{name} ({info.family}, {info.sample_rate} Hz)",
                    attribution=attribution,
                    installed=True,
                    version=None,
                    languages=[info.language],
                    speakers=[TtsVoiceSpeaker(s) for s in info.speakers] or None,
                )
            )
        program = TtsProgram(
            name="fastvoice",
            description="offline neural text to speech",
            attribution=attribution,
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    def blocks(
        self, text: str, voice: str | None, speaker: str | None, *, ssml: bool = False
    ) -> Iterator[np.ndarray]:
        """The audio of `text` as `fastvoice say` makes it (sentence pauses and fades)."""
        options = SpeechOptions(speaker=int(speaker) if speaker and speaker.isdigit() else speaker)
        name = self.synthesizer.voices.require(voice)
        chunks = self.synthesizer.synthesize(text, name, options, ssml=ssml)
        audio = self.settings.config.audio
        return self._admitted(
            join_sentences(
                chunks,
                self.rate_of(name),
                audio.sentence_pause_s,
                audio.fade_ms,
            )
        )

    def _admitted(self, blocks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """The blocks, made while this request holds one of the `max_requests` places (taken
        at its first block, given back at its end, or when the client goes and the generator
        is closed)."""
        with self.admission:
            yield from blocks

    def rate_of(self, voice: str | None) -> int:
        return self.synthesizer.voices.get(voice).info.sample_rate
