"""`fastvoice serve`'s running service: its parts started and stopped as steps, what a reload
changes in the parts that keep state of their own, and the report of it all.

The parts are built and wired by `daemon.app.composition.build_service`; the main thread's
loop (signals, watchdog, stats, reload) is `daemon.app.supervisor.Supervisor`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from daemon.app.bootsteps import Steps
from daemon.audio.player import Player
from daemon.box import sdnotify
from daemon.service.event_sink import EventSink
from daemon.service.front_door import FrontDoor
from daemon.service.jobs import JobQueue
from daemon.service.lanes import Lane
from daemon.service.outbox import Outbox
from daemon.service.settings import ReloadReport, Settings
from daemon.service.status import StatusReport
from daemon.service.voice_loading import VoiceLoading
from daemon.speech.cache import PhraseCache
from daemon.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


@dataclass
class Service:
    settings: Settings
    steps: Steps
    loading: VoiceLoading
    status: StatusReport
    door: FrontDoor
    voices: VoiceRegistry
    cache: PhraseCache | None
    player: Player
    queue: JobQueue
    lanes: list[Lane]
    events: EventSink
    outbox: Outbox

    def start(self) -> None:
        self.steps.start()
        # Once every part is up: status/info as the broker first heard it may predate the
        # servers (a port that could not be bound, the local socket's path).
        self.status.publish_info()
        mqtt = self.settings.config.mqtt
        sdnotify.notify("READY=1")
        sdnotify.notify(f"STATUS=serving on {mqtt.host}:{mqtt.port}")

    def stop(self) -> None:
        sdnotify.notify("STOPPING=1")
        self.steps.stop()
        self.player.release()  # the output held open after the last job

    def refresh_info(self) -> None:
        self.status.refresh_info()

    def refuse_reload(self, error: str) -> None:
        """A reload refused (the old config stays): said in status/info as well as the log."""
        self.settings.refuse_reload(error)
        self.status.publish_info()

    def apply(self, report: ReloadReport) -> None:
        """What a reload changed, given to the parts that keep state of their own (the others
        read the config in force when they use it)."""
        config, changed = self.settings.config, set(report.changed)
        if "voice" in changed:  # the file names another voice: it replaces an MQTT choice
            self.voices.set_default(config.voice)  # before the refresh tries the broken again
        self.loading.refresh()
        if "voice" in changed:
            self.door.changed("voice")
        if any(key.startswith("audio.") for key in changed):
            self.player.apply(config.audio)
        if "audio.volume" in changed:
            self.door.set_volume(config.audio.volume)
        if "queue.max_jobs" in changed:
            self.queue.max_jobs = config.queue.max_jobs
        if "cache.max_mb" in changed and self.cache is not None:
            self.cache.resize(config.cache.max_bytes)
        self.status.publish_info()
