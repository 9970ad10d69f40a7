"""`voices/install` and `voices/remove` under the base topic: a catalogue voice installed into
the running service, on a thread of its own (one request at a time, in order), each step told
in a `voice_install` event with the request's id: downloading (per file, every tenth),
building, installed or failed. Once installed the voice is usable at once, without a restart."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from daemon.errors import FastvoiceError
from daemon.service.artifact_build import build_missing_artifacts
from daemon.service.commands import CommandError, VoiceInstallCommand, parse_voice_install
from daemon.service.event_sink import EventSink
from daemon.service.settings import Settings

log = logging.getLogger(__name__)
EVENT = "voice_install"


class VoiceInstalls:
    def __init__(
        self,
        settings: Settings,
        events: EventSink,
        on_change: Callable[[], None],
        gpu_in_play: bool,
    ) -> None:
        """`on_change`: called after a voice came or went (the registry rescans)."""
        self.settings = settings
        self.events = events
        self.on_change = on_change
        self.gpu_in_play = gpu_in_play
        self._requests: queue.Queue[tuple[str, VoiceInstallCommand]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def handlers(self) -> dict[str, Callable[[bytes], None]]:
        return {
            "voices/install": lambda payload: self._take("install", payload),
            "voices/remove": lambda payload: self._take("remove", payload),
        }

    def _take(self, action: str, payload: bytes) -> None:
        """On paho's thread: parse, then hand over; nothing slow here."""
        try:
            command = parse_voice_install(payload, self.settings.config.queue.max_payload_bytes)
        except CommandError as error:
            self.events.emit(
                EVENT, None, id=error.job_id, state="failed", message=f"voices/{action}: {error}"
            )
            return
        self._requests.put((action, command))
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="voice-installs", daemon=True
                )
                self._worker.start()

    def _work(self) -> None:
        while True:
            action, command = self._requests.get()
            try:
                if action == "install":
                    self._install(command)
                else:
                    self._remove(command)
            except FastvoiceError as error:
                self._event(command, "failed", message=str(error))
            except Exception as error:  # the thread must outlive any one request
                log.exception("voices/%s %s failed", action, command.name)
                self._event(command, "failed", message=f"internal error: {error!r}")

    def _event(self, command: VoiceInstallCommand, state: str, **fields) -> None:
        self.events.emit(EVENT, None, id=command.id, voice=command.name, state=state, **fields)

    def _install(self, command: VoiceInstallCommand) -> None:
        from daemon.runtime.artifacts import default_store
        from daemon.voices.bundled import is_bundled
        from daemon.voices.catalog import find, read_catalog
        from daemon.voices.install import Transfer, install, install_bundled
        from daemon.voices.installed import voices_dir

        config = self.settings.config
        if is_bundled(command.name):  # nothing to download: it comes with an extra
            store = config.runtime.artifact_dir or default_store()
            install_bundled(voices_dir(config.catalog.dir), command.name, store)
            self._built(command, command.name, language="ja_JP", speakers=None)
            return
        entry = find(read_catalog(config.catalog.url), command.name)
        told: dict[str, int] = {}

        def progress(transfer: Transfer) -> None:
            tenth = transfer.done * 10 // max(transfer.total, 1)
            if told.get(transfer.file) != tenth:
                told[transfer.file] = tenth
                self._event(
                    command,
                    "downloading",
                    file=transfer.file,
                    done=transfer.done,
                    total=transfer.total,
                )

        voice = install(config.catalog, entry, config.catalog.files_url, progress)
        speakers = list(entry.speaker_id_map) or None
        self._built(command, voice.name, language=entry.language.code, speakers=speakers)

    def _built(self, command: VoiceInstallCommand, name: str, **described) -> None:
        """Builds what the new voice needs, has the service take it, and says so."""
        self._event(command, "building", message=f"artifacts and loudness of {name}")
        problem = build_missing_artifacts(self.settings.config, self.gpu_in_play)
        self.on_change()
        self._event(command, "installed", message=problem, **described)

    def _remove(self, command: VoiceInstallCommand) -> None:
        from daemon.errors import VoiceError
        from daemon.voices.install import remove

        config = self.settings.config
        if command.name == config.voice:
            raise VoiceError(f"{command.name!r} is the default voice; choose another first")
        remove(config.catalog, command.name)
        self.on_change()
        self._event(command, "removed")
