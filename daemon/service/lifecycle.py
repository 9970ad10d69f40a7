"""`fastvoice serve`: the running service's parts, and how they start, report and stop.

The parts are wired by `daemon.service.composition.build_service`; the main thread's loop (signals,
watchdog, stats, reload) is `daemon.service.supervisor.Supervisor`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from daemon import __version__
from daemon.adapters.fleet import Fleet
from daemon.adapters.homeassistant import HomeAssistantDiscovery
from daemon.adapters.local_server import LocalServer
from daemon.adapters.render_queue import RenderQueue
from daemon.adapters.wyoming_server import WyomingServer
from daemon.audio.player import Player
from daemon.box import sdnotify
from daemon.box.clock import clock_state
from daemon.errors import FastvoiceError, VoiceError, error_text
from daemon.mqtt.broker import MqttLink
from daemon.mqtt.command_topics import MqttCommands
from daemon.service.artifact_build import build_missing_artifacts
from daemon.service.event_sink import EventSink
from daemon.service.intake import JobIntake
from daemon.service.jobs import JobQueue
from daemon.service.journal import JobJournal
from daemon.service.lanes import Lane
from daemon.service.outbox import Outbox
from daemon.service.quiet_hours import quiet_for
from daemon.service.scheduler import Scheduler
from daemon.service.settings import ReloadReport, Settings
from daemon.speech.cache import PhraseCache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry

if TYPE_CHECKING:  # imported only when HTTP is on
    from daemon.adapters.http_server import HttpServer

log = logging.getLogger(__name__)


@dataclass
class Service:
    settings: Settings
    backend_reason: str
    voices: VoiceRegistry
    cache: PhraseCache | None
    synthesizer: Synthesizer
    player: Player
    queue: JobQueue
    journal: JobJournal | None
    outbox: Outbox
    events: EventSink
    lanes: list[Lane]
    intake: JobIntake
    commands: MqttCommands
    link: MqttLink
    discovery: HomeAssistantDiscovery | None = None
    fleet: Fleet | None = None
    scheduler: Scheduler | None = None
    render: RenderQueue | None = None
    wyoming: WyomingServer | None = None
    local: LocalServer | None = None
    http: HttpServer | None = None
    artifacts_problem: str | None = field(default=None, init=False)
    published_problems: tuple[str | None, ...] | None = field(default=None, init=False)
    started: float = field(default_factory=time.time, init=False)
    unannounced_broken: list[str] = field(default_factory=list, init=False)

    # --- lifecycle (main thread) ---

    def start(self) -> None:
        config = self.settings.config
        gpu_in_play = self.voices.backend.gpu_report() is not None
        self.artifacts_problem = build_missing_artifacts(config, gpu_in_play)
        sdnotify.notify("STATUS=loading voices")
        self.load_voices(self.voices.names)
        self.pregenerate()
        self.intake.recover()
        for lane in self.lanes:
            lane.start()
        if self.scheduler is not None:
            self.scheduler.start()
        if self.wyoming is not None:
            self.wyoming.start()
            self.wyoming.ready.wait(30)
            if self.wyoming.error is not None:
                log.error("%s; serving MQTT only", self.wyoming.error)
        if self.http is not None:
            self.http.start()
            self.http.ready.wait(30)
            if self.http.error is not None:
                log.error("%s; serving without HTTP", self.http.error)
        if self.local is not None:
            if self.local.listen():
                self.local.start()
                log.info("local jobs on %s", self.local.path)
            else:
                log.error("%s; `fastvoice say` will speak on its own", self.local.problem)
        self.link.start()
        if self.render is not None:
            self.render.start(config.mqtt)
        sdnotify.notify("READY=1")
        sdnotify.notify(f"STATUS=serving on {config.mqtt.host}:{config.mqtt.port}")

    def load_voices(self, names: list[str]) -> None:
        """Loads and warms voices. One that cannot load or speak is quarantined (reported in
        status/info, metrics and a `voice_broken` event); if it is the default voice, the
        embedded voice stands in for it, said in the log and the event."""
        for name in names:
            self.warm(name)
        broken_default = self.voices.fall_back()
        if broken_default is not None:
            log.error(
                "the default voice %r cannot be used; speaking with the embedded voice %r "
                "until it is fixed (%s)",
                broken_default.name,
                self.voices.default,
                broken_default.fix,
            )
            self.warm(self.voices.default)
        self.unannounced_broken += [
            name
            for name in self.voices.broken
            if name in names and name not in self.unannounced_broken
        ]

    def warm(self, name: str) -> None:
        """Loads a voice and runs it once: ONNX Runtime's first run of a session is slow, so
        it is paid here, not by the first job. A voice that fails is quarantined."""
        try:
            voice = self.voices.get(name)
        except VoiceError:  # quarantined by the registry as it failed to load
            return
        try:
            for _ in voice.synthesize_sentence("Ready.", SpeechOptions()):
                pass
        except Exception as error:  # it loaded, but cannot speak
            self.voices.quarantine(name, f"cannot speak: {error_text(error)}")

    def announce_broken(self) -> None:
        """A `voice_broken` event for each voice quarantined since the last announcement."""
        for name in self.unannounced_broken:
            broken = self.voices.broken.get(name)
            if broken is None:
                continue
            fallback = self.voices.default if self.voices.fallback_from == name else None
            fields = {"message": broken.message, "fix": broken.fix, "fallback": fallback}
            self.events.emit("voice_broken", None, voice=name, **fields)
        self.unannounced_broken = []

    def pregenerate(self) -> None:
        """Renders the configured fixed phrases into the cache (already cached ones are hits)."""
        items = self.settings.config.cache.pregenerate
        if self.cache is None or not items:
            return
        for number, item in enumerate(items, 1):
            sdnotify.notify(f"STATUS=pregenerating phrase {number}/{len(items)}")
            options = SpeechOptions(speaker=item.speaker)
            try:
                for _ in self.synthesizer.synthesize(item.text, item.voice, options):
                    pass
            except FastvoiceError as error:
                log.error("cache.pregenerate.%d: %s", number - 1, error)

    def stop(self) -> None:
        sdnotify.notify("STOPPING=1")
        if self.render is not None:  # first: what it holds goes to the others, not stopped here
            self.render.stop()
        if self.local is not None:
            self.local.shutdown()
        if self.wyoming is not None:
            self.wyoming.shutdown()
        if self.http is not None:
            self.http.shutdown()
        if self.scheduler is not None:
            self.scheduler.shutdown()
        for lane in self.lanes:
            lane.shutdown()
        for lane in self.lanes:
            lane.join(timeout=10)
        if self.fleet is not None and self.link.connected:
            self.fleet.withdraw()
        self.link.stop()

    def apply(self, report: ReloadReport) -> None:
        """What a reload changed, given to the parts that keep state of their own (the others
        read the config in force when they use it)."""
        config, changed = self.settings.config, set(report.changed)
        self.refresh_voices(announce=False)
        if "voice" in changed:
            self.voices.default = config.voice
            self.commands.publish("voice")
        if any(key.startswith("audio.") for key in changed):
            self.player.apply(config.audio)
        if "audio.volume" in changed:
            self.player.volume = config.audio.volume
            self.commands.publish("volume")
        if "queue.max_jobs" in changed:
            self.queue.max_jobs = config.queue.max_jobs
        if "cache.max_mb" in changed and self.cache is not None:
            self.cache.resize(config.cache.max_bytes)
        self.publish_info()

    def refresh_voices(self, announce: bool = True) -> None:
        """Takes voices installed or removed since (the voices directory is rescanned); Home
        Assistant's voice select hears of a change."""
        retried = sorted(self.voices.broken)
        added, removed = self.voices.refresh(self.settings.config)
        # Loaded and warmed here, not on the network thread of a first job.
        self.load_voices(sorted({*added, *retried} - set(removed)))
        if self.link.connected:
            self.announce_broken()
        if added or removed:
            log.info("voices: added %s; removed %s", added or "none", removed or "none")
            if self.discovery is not None:
                self.discovery.announce()
        if announce:
            self.publish_info()

    # --- status ---

    def on_online(self) -> None:
        self.announce_broken()
        self.publish_info()
        self.commands.publish_state()
        if self.discovery is not None:
            self.discovery.announce()
        if self.fleet is not None:
            self.fleet.announce()

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
            self.artifacts_problem,
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
        backend = self.voices.backend
        last_reload = self.settings.last_reload
        quiet = quiet_for(self.settings.config)
        return {
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
            "audio": self.player.describe(),
            "cache": self.cache.describe() if self.cache is not None else None,
            "journal": self.journal.describe() if self.journal is not None else None,
            "artifacts_problem": self.artifacts_problem,
            "mqtt_problem": self.link.problem,
            "local_socket": None if self.local is None else str(self.local.path),
            "http": None if self.http is None else "{}:{}".format(*self.http.address),
            "http_problem": None if self.http is None else self.http.error,
            "local_socket_problem": None if self.local is None else self.local.problem,
            "config_reload": None if last_reload is None else last_reload.as_dict(),
            "restart_needed": self.settings.restart_needed,
            "quiet_hours_now": None if quiet is None else quiet.as_dict(),
            "fleet": None if self.fleet is None else self.fleet.as_dict(),
            "clock": clock_state(),
            "render_queue": None if self.render is None else self.render.as_dict(),
            "schedules": [] if self.scheduler is None else self.scheduler.upcoming(),
        }
