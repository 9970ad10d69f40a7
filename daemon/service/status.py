"""What the service says about itself: `status/info` (retained, published again when a problem
comes or goes), the state `/metrics` reads at each scrape. It reads the parts; it changes none."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from daemon import __version__
from daemon.audio.player import Player
from daemon.box.clock import clock_state
from daemon.errors import FastvoiceError
from daemon.service.jobs import JobQueue
from daemon.service.journal import JobJournal
from daemon.service.lanes import Lane
from daemon.service.outbox import Outbox
from daemon.service.quiet_hours import quiet_for
from daemon.service.settings import Settings
from daemon.service.voice_loading import VoiceLoading
from daemon.speech.cache import PhraseCache


class BrokerState(Protocol):
    """What the report reads of the broker connection (`daemon.mqtt.broker.MqttLink`)."""

    connected: bool
    problem: str | None


# A part's own lines of status/info ("http", "http_problem", ...), asked at each report.
Reporter = Callable[[], dict[str, Any]]
# The lines of the parts a config may leave out, None while they are out.
OPTIONAL_LINES = ("local_socket", "local_socket_problem", "http", "http_problem", "render_queue")


class StatusReport:
    def __init__(
        self,
        *,
        settings: Settings,
        backend_reason: str,
        loading: VoiceLoading,
        cache: PhraseCache | None,
        journal: JobJournal | None,
        player: Player,
        queue: JobQueue,
        lanes: list[Lane],
        link: BrokerState,
        outbox: Outbox,
    ) -> None:
        self.settings = settings
        self.backend_reason = backend_reason
        self.loading = loading
        self.voices = loading.voices
        self.cache = cache
        self.journal = journal
        self.player = player
        self.queue = queue
        self.lanes = lanes
        self.link = link
        self.outbox = outbox
        self.reporters: list[Reporter] = []
        self.started = time.time()
        self.published_problems: tuple[str | None, ...] | None = None

    def publish_info(self) -> None:
        self.published_problems = self.problems()
        self.outbox.publish_json("status/info", self.info(), retain=True)

    def refresh_info(self) -> None:
        """Publishes status/info again when a problem came or went since it was published."""
        if self.problems() != self.published_problems:
            self.publish_info()

    def problems(self) -> tuple[str | None, ...]:
        """What can go wrong while serving (a disk that fills up, ...), cheap to read: info()
        itself asks the audio device, which a periodic check should not."""
        return (
            self.cache.problem if self.cache is not None else None,
            self.journal.problem if self.journal is not None else None,
            self.loading.artifacts_problem,
            self.link.problem,
            ", ".join(sorted(self.voices.broken)) or None,
        )

    def metrics_state(self) -> dict[str, Any]:
        """What /metrics reads at each scrape."""
        stages = [
            stage.as_dict()
            for name in self.voices.usable()
            for stage in self.voices.get(name).info.stages
        ]
        memory = self.voices.backend.gpu_memory()
        return {
            "queued": len(self.queue),
            "playing": sum(1 for lane in self.lanes if lane.current is not None),
            "broker_connected": self.link.connected,
            "stages": stages,
            "broken_voices": sorted(self.voices.broken),
            "gpu_memory_bytes": None if memory is None else memory.get("process_bytes"),
        }

    def info(self) -> dict[str, Any]:
        voices = [self.voices.get(name).info.as_dict() for name in self.voices.usable()]
        try:
            target = self.player.target(self.voices.get().info.sample_rate).name
        except FastvoiceError as error:
            target = f"unavailable: {error}"
        file_dir = self.settings.config.audio.file_dir
        if file_dir is not None:
            target += f" (files in {file_dir})"
        backend = self.voices.backend
        last_reload, attempt = self.settings.last_reload, self.settings.last_reload_attempt
        quiet = quiet_for(self.settings.config)
        info = {
            "v": 1,
            "version": __version__,
            "started": round(self.started, 3),
            "broker_connected": self.link.connected,
            "default_voice": self.voices.default,
            "default_voice_fallback_from": self.voices.fallback_from,
            "voices": voices,
            "broken_voices": [broken.as_dict() for broken in self.voices.broken.values()],
            "backend": backend.name,
            "backend_reason": self.backend_reason,
            "workers": backend.workers,
            "gpu": backend.gpu_report(),
            "audio_device": target,
            "audio": {**self.player.describe(), "file_dir": file_dir and str(file_dir)},
            "cache": self.cache.describe() if self.cache is not None else None,
            "journal": self.journal.describe() if self.journal is not None else None,
            "artifacts_problem": self.loading.artifacts_problem,
            "mqtt_problem": self.link.problem,
            "config_reload": None if last_reload is None else last_reload.as_dict(),
            "config_reload_attempt": None if attempt is None else attempt.as_dict(),
            "restart_needed": self.settings.restart_needed,
            "quiet_hours_now": None if quiet is None else quiet.as_dict(),
            "clock": clock_state(),
            "schedules": [],
            **dict.fromkeys(OPTIONAL_LINES),
        }
        for reporter in self.reporters:
            info.update(reporter())
        return info
