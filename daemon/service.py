"""`fastvoice serve`: wires config → voices → queue → speaker → MQTT, and runs the main thread.

The main thread handles signals (SIGTERM stops, SIGHUP reloads the config), the systemd
watchdog (pinged only while every speaker thread is alive and progressing) and periodic stats.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from daemon import __version__, sdnotify
from daemon.adapters.hermes import HermesTts
from daemon.adapters.homeassistant import HomeAssistantDiscovery, node_id
from daemon.adapters.homeassistant import unregister as unregister_discovery
from daemon.adapters.local_server import LocalServer
from daemon.adapters.wyoming_server import WyomingServer
from daemon.audio.player import Player
from daemon.cache import phrase_cache
from daemon.commands import (
    CommandError,
    SayCommand,
    check_reply_topic,
    parse_pause,
    parse_say,
    parse_stop,
    parse_voice,
    parse_volume,
)
from daemon.config import Config, WyomingConfig, load_config
from daemon.errors import FastvoiceError, VoiceError
from daemon.events import ENDS
from daemon.jobs import DuplicateJob, Job, JobQueue, QueueFull
from daemon.journal import JobJournal, state_root
from daemon.local_socket import service_socket_path
from daemon.mqtt import MqttLink
from daemon.runtime.select import create_backend
from daemon.speaker import Speaker, publish_only
from daemon.synthesizer import Synthesizer
from daemon.text import prepare
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


class Service:
    def __init__(self, config: Config, config_path: Path | None) -> None:
        self.config = config
        self.config_path = config_path
        backend, self.backend_reason = create_backend(config, concurrent=True)
        self.voices = VoiceRegistry(config, backend)
        self.cache = phrase_cache(config.cache)
        self.synthesizer = Synthesizer(self.voices, config.text, self.cache)
        self.player = Player(
            device=config.audio.device,
            volume=config.audio.volume,
            output_rate=config.audio.sample_rate,
            prefill_s=config.audio.prefill_s,
            buffer_s=max(2.0, config.audio.prefill_s),
        )
        self.queue = JobQueue(config.queue.max_jobs)
        self.journal = (
            JobJournal(config.queue.journal_dir or state_root() / "jobs")
            if config.queue.persist
            else None
        )
        # One speaker owns the player; parallel workers add lanes for publish-only jobs.
        self.speakers = [
            Speaker(
                self.queue,
                self.synthesizer,
                self.player,
                config.audio,
                self.emit,
                self._publish,
                config.queue.resume_interrupted,
                name="speaker" if lane == 0 else f"publisher-{lane}",
                accepts=None if lane == 0 else publish_only,
            )
            for lane in range(backend.workers)
        ]
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        external: dict[str, Callable[[str, bytes], None]] = {}
        self.discovery = None
        if config.homeassistant.discovery:
            self.discovery = HomeAssistantDiscovery(config, self._publish)
            external.update(self.discovery.subscriptions())
        if config.hermes.enabled:
            hermes = HermesTts(
                config.hermes, config.queue.max_payload_bytes, self.submit, self._publish
            )
            external.update(hermes.subscriptions())
            self.listeners.append(hermes.on_event)
        self.wyoming = None
        if config.wyoming.uri is not None:
            self.wyoming = WyomingServer(
                config.wyoming.uri,
                self.synthesizer,
                config.audio,
                config.text,
                lambda: self.default_voice,
                config.queue.max_payload_bytes,
                max_requests=backend.workers,
            )
        self.local = None
        socket_path = service_socket_path()
        if config.local.socket and socket_path is not None:
            reply_prefix = f"{config.mqtt.base_topic}/local"
            self.local = LocalServer(
                socket_path, self.submit, config.queue.max_payload_bytes, reply_prefix
            )
            self.listeners.append(self.local.on_event)
        self.link = MqttLink(
            config.mqtt,
            {
                "say": self.on_say,
                "stop": self.on_stop,
                "volume": self.on_volume,
                "pause": self.on_pause,
                "voice": self.on_voice,
            },
            self._on_online,
            external,
        )
        self.default_voice = config.voice
        self.counts = {"accepted": 0, "finished": 0, "failed": 0, "rejected": 0, "interrupted": 0}
        self.latencies: deque[float] = deque(maxlen=500)
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._stall_reported = False
        self._published_problems: tuple[str | None, ...] | None = None
        self.artifacts_problem: str | None = None

    # --- commands (paho's thread: validate and enqueue, nothing slow) ---

    def on_say(self, payload: bytes) -> None:
        mqtt = self.config.mqtt
        try:
            command = parse_say(payload, self.config.queue.max_payload_bytes)
            check_reply_topic(command, mqtt.base_topic, mqtt.reply_topic_prefixes)
        except CommandError as error:
            self.emit("rejected", None, id=error.job_id, reason="invalid", message=str(error))
            return
        self.submit(command)

    def submit(self, command: SayCommand) -> str | None:
        """Checks and queues a command from any interface. None when accepted, else why not
        (also sent as a `rejected` event)."""
        try:
            prepare(command.text, self.config.text)
            if command.voice is not None:
                self.voices.require(command.voice)
        except FastvoiceError as error:
            self.emit("rejected", None, id=command.id, reason="invalid", message=str(error))
            return str(error)
        if command.voice is None:
            command = command.model_copy(update={"voice": self.default_voice})
        job = Job(command)
        if self.journal is not None:  # before the queue: a speaker may end the job at once
            job.journal = self.journal.record(command, time.time())
        refused = self._enqueue(job)
        if refused is None and command.priority == "critical":
            self._make_room(job)
        return refused

    def _enqueue(self, job: Job, **fields: Any) -> str | None:
        """Queues a job with its `queued` event; or its `rejected` event and why (which also
        drops its journal entry)."""
        try:
            self.queue.put(job)
        except DuplicateJob:
            message = "this id was already accepted"
            self.emit("rejected", job, reason="duplicate", message=message)
            return message
        except QueueFull:
            message = f"{self.config.queue.max_jobs} jobs already queued"
            self.emit("rejected", job, reason="queue_full", message=message)
            return message
        self.counts["accepted"] += 1
        priority = job.command.priority
        self.emit("queued", job, priority=priority, queue_depth=len(self.queue), **fields)
        return None

    def recover(self) -> None:
        """Queues the jobs a crash or a restart cut off, as they were accepted."""
        if self.journal is None:
            return
        for command, accepted_at, path in self.journal.pending():
            job = Job(command, journal=path)
            job.received -= max(0.0, time.time() - accepted_at)  # expiry counts from acceptance
            self._enqueue(job, recovered=True)

    def _make_room(self, job: Job) -> None:
        """A critical job cuts short a non-critical one it would otherwise wait for."""
        lanes = [speaker for speaker in self.speakers if speaker.takes(job)]
        if any(speaker.current is None for speaker in lanes):
            return
        for speaker in lanes:
            current = speaker.current
            if current is not None and current.command.priority != "critical":
                speaker.interrupt("critical")
                return

    def _parsed(self, parser: Callable[[bytes, int], Any], topic: str, payload: bytes) -> Any:
        """The parsed payload, or None after a `rejected` event naming the problem."""
        try:
            return parser(payload, self.config.queue.max_payload_bytes)
        except CommandError as error:
            self.emit("rejected", None, reason="invalid", message=f"{topic}: {error}")
            return None

    def on_stop(self, payload: bytes) -> None:
        command = self._parsed(parse_stop, "stop", payload)
        if command is None:
            return
        if command.all:
            for job in self.queue.clear():
                self.emit("interrupted", job, reason="stopped", message="cleared from the queue")
        for speaker in self.speakers:
            speaker.interrupt("stopped")

    def on_volume(self, payload: bytes) -> None:
        volume = self._parsed(parse_volume, "volume", payload)
        if volume is None:
            return
        self.player.volume = volume
        self.link.publish(self.link.topic("volume/state"), f"{volume:g}", retain=True)

    def on_voice(self, payload: bytes) -> None:
        """Sets the voice of requests that name none (Home Assistant's voice `select`)."""
        name = self._parsed(parse_voice, "voice", payload)
        if name is None:
            return
        try:
            self.voices.require(name)
        except VoiceError as error:
            self.emit("rejected", None, reason="invalid", message=f"voice: {error}")
            return
        self.default_voice = name
        self.link.publish(self.link.topic("voice/state"), name, retain=True)

    def on_pause(self, payload: bytes) -> None:
        """Pauses what is playing and the queue; jobs keep being accepted."""
        paused = self._parsed(parse_pause, "pause", payload)
        if paused is None:
            return
        self.queue.set_paused(paused)
        self.player.paused = paused
        state = "true" if paused else "false"
        self.link.publish(self.link.topic("pause/state"), state, retain=True)

    # --- outputs ---

    def emit(self, event: str, job: Job | None, **fields: Any) -> None:
        """One JSON message per state change of a job, always with its id."""
        message: dict[str, Any] = {"v": 1, "event": event, "id": job.id if job else None}
        message.update({k: v for k, v in fields.items() if v is not None or k == "id"})
        message["time"] = round(time.time(), 3)
        if event in self.counts:
            self.counts[event] += 1
        ended = event in ENDS and not fields.get("will_resume")
        if ended and job is not None and job.journal is not None:  # gone, or never queued
            JobJournal.done(job.journal)
            job.journal = None
        if event in ("finished", "interrupted") and job is not None and job.first_audio:
            self.latencies.append(job.first_audio - job.received)
        log.info("job %s %s %s", message["id"], event, fields.get("message", ""))
        self.link.publish_json("events", message)
        for listener in self.listeners:
            try:
                listener(message)
            except Exception:
                log.exception("event listener failed on %s", message)

    def _publish(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        if self.local is not None and self.local.deliver(topic, payload):
            return
        self.link.publish(topic, payload, retain)

    def info(self) -> dict[str, Any]:
        voices = [self.voices.get(name).info.as_dict() for name in self.voices.names]
        target = None
        try:
            target = self.player.target(self.voices.get().info.sample_rate).name
        except FastvoiceError as error:
            target = f"unavailable: {error}"
        return {
            "v": 1,
            "version": __version__,
            "default_voice": self.default_voice,
            "voices": voices,
            "backend": self.voices.backend.name,
            "backend_reason": self.backend_reason,
            "workers": self.voices.backend.workers,
            "gpu": self.voices.backend.gpu_report(),
            "audio_device": target,
            "cache": self.cache.describe() if self.cache is not None else None,
            "journal": self.journal.describe() if self.journal is not None else None,
            "artifacts_problem": self.artifacts_problem,
            "local_socket": None if self.local is None else str(self.local.path),
            "local_socket_problem": None if self.local is None else self.local.problem,
        }

    def stats(self) -> dict[str, Any]:
        latencies = sorted(self.latencies)
        percentile = (
            statistics.quantiles(latencies, n=10, method="inclusive")
            if len(latencies) > 1
            else None
        )
        return {
            "v": 1,
            "jobs": dict(self.counts),
            "queue_depth": len(self.queue),
            "latency_p50_s": round(statistics.median(latencies), 4) if latencies else None,
            "latency_p90_s": round(percentile[8], 4) if percentile else None,
            "rss_bytes": psutil.Process().memory_info().rss,
            "gpu_memory": self.voices.backend.gpu_memory(),
        }

    def _problems(self) -> tuple[str | None, ...]:
        """What can go wrong while serving (a disk that fills up, ...), cheap to read: info()
        itself asks the audio device, which a periodic check should not."""
        return (
            self.cache.problem if self.cache is not None else None,
            self.journal.problem if self.journal is not None else None,
            self.artifacts_problem,
        )

    def _publish_info(self) -> None:
        self._published_problems = self._problems()
        self.link.publish_json("status/info", self.info(), retain=True)

    def _on_online(self) -> None:
        self._publish_info()
        self.link.publish(self.link.topic("volume/state"), f"{self.player.volume:g}", retain=True)
        paused = "true" if self.queue.paused else "false"
        self.link.publish(self.link.topic("pause/state"), paused, retain=True)
        self.link.publish(self.link.topic("voice/state"), self.default_voice, retain=True)
        if self.discovery is not None:
            self.discovery.announce()

    # --- lifecycle (main thread) ---

    def build_artifacts(self) -> None:
        """First start on a box (or after an upgrade, or a corrupted file): optimise the voices
        before loading them. When everything is there and intact (sizes and checksums checked
        here), no build process is started: a restart serves at once."""
        runtime = self.config.runtime
        if not (runtime.artifacts and runtime.build_on_start):
            return
        import multiprocessing

        from daemon.runtime.artifacts import default_store
        from edge_build.build import missing_artifacts

        sdnotify.notify("STATUS=checking artifacts for this box")
        store = runtime.artifact_dir or default_store()
        try:
            gpu = self.voices.backend.gpu_report() is not None
            missing = missing_artifacts(self.config, store, gpu)
        except (FastvoiceError, OSError) as error:
            missing = [f"a check that failed ({error})"]
        if not missing:
            return
        log.info("building %s", ", ".join(missing))
        # In a process of its own: a build and its quality gate peak at hundreds of MB that
        # a long-running service would otherwise keep. Its progress comes back over a pipe and
        # goes to systemd (only the main process may notify), each message extending the start
        # timeout: a TensorRT build on a Jetson takes minutes.
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_build_child, args=(self.config, store, sender))
        child.start()
        sender.close()
        try:
            results = _follow_build(receiver, child)
            for result in results:
                if result.status != "up to date":
                    log.info("%s: %s in %.1f s", result.stage, result.status, result.seconds)
        except (FastvoiceError, OSError) as error:
            self.artifacts_problem = f"building artifacts failed: {error}"
            log.error("%s; loading the source models", self.artifacts_problem)
        finally:
            receiver.close()
            child.join()

    def start(self) -> None:
        self.build_artifacts()
        sdnotify.notify("STATUS=loading voices")
        for name in self.voices.names:
            voice = self.voices.get(name)
            # ONNX Runtime's first run of a session is slow: pay it now, not on the first job.
            for _ in voice.synthesize_sentence("Ready.", SpeechOptions()):
                pass
        self.pregenerate()
        self.recover()
        for speaker in self.speakers:
            speaker.start()
        if self.wyoming is not None:
            self.wyoming.start()
            self.wyoming.ready.wait(30)
            if self.wyoming.error is not None:
                log.error("%s; serving MQTT only", self.wyoming.error)
        if self.local is not None:
            if self.local.listen():
                self.local.start()
                log.info("local jobs on %s", self.local.path)
            else:
                log.error("%s; `fastvoice say` will speak on its own", self.local.problem)
        self.link.start()
        sdnotify.notify("READY=1")
        sdnotify.notify(f"STATUS=serving on {self.config.mqtt.host}:{self.config.mqtt.port}")

    def pregenerate(self) -> None:
        """Renders the configured fixed phrases into the cache (already cached ones are hits)."""
        items = self.config.cache.pregenerate
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

    def stalled(self) -> list[str]:
        """Speakers that died, or that have made no progress on a job for `stall_limit_s`
        (idle ones beat while they wait; paused ones are excused)."""
        now, limit = time.monotonic(), self.config.queue.stall_limit_s
        return [
            speaker.name
            for speaker in self.speakers
            if not speaker.is_alive() or (now - speaker.heartbeat > limit and not self.queue.paused)
        ]

    def _watchdog(self) -> None:
        stalled = self.stalled()
        if not stalled:
            if self._stall_reported:
                log.warning("speakers progress again; watchdog pings resume")
                self._stall_reported = False
            sdnotify.notify("WATCHDOG=1")
            return
        if not self._stall_reported:
            message = (
                f"{', '.join(stalled)} stalled (no progress for "
                f"{self.config.queue.stall_limit_s:g} s); watchdog pings withheld"
            )
            log.error("%s: systemd will restart the service", message)
            sdnotify.notify(f"STATUS={message}")
            self._stall_reported = True

    def reload(self) -> None:
        try:
            new = load_config(self.config_path)
        except FastvoiceError as error:
            log.error("config reload refused, keeping the old config: %s", error)
            sdnotify.notify(f"STATUS=config reload refused: {str(error).splitlines()[0]}")
            return
        if new.voices != self.config.voices or new.runtime != self.config.runtime:
            log.warning("voice and runtime changes take effect after a restart")
        if new.mqtt != self.config.mqtt:
            log.warning("mqtt changes take effect after a restart")
        self.config = new
        if self.default_voice not in new.voices:
            self.default_voice = new.voice
        self.synthesizer.text_config = new.text
        for speaker in self.speakers:
            speaker.audio = new.audio
        self.player.device, self.player.volume = new.audio.device, new.audio.volume
        self.player.output_rate = new.audio.sample_rate
        self.player.prefill_s = new.audio.prefill_s
        self.player.buffer_s = max(2.0, new.audio.prefill_s)
        self.queue.max_jobs = new.queue.max_jobs
        log.info("config reloaded")
        sdnotify.notify("STATUS=config reloaded")

    def request_stop(self, *_: Any) -> None:
        self._stop.set()

    def request_reload(self, *_: Any) -> None:
        self._reload.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        self.start()
        watchdog = sdnotify.watchdog_interval_s()
        tick = min(1.0, watchdog or 1.0)
        next_stats = time.monotonic() + self.config.mqtt.stats_interval_s
        while not self._stop.wait(tick):
            if self._reload.is_set():
                self._reload.clear()
                self.reload()
            if watchdog is not None:
                self._watchdog()
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + self.config.mqtt.stats_interval_s
                self.link.publish_json("stats", self.stats())
                if self._problems() != self._published_problems:
                    self._publish_info()
        sdnotify.notify("STOPPING=1")
        if self.local is not None:
            self.local.shutdown()
        if self.wyoming is not None:
            self.wyoming.shutdown()
        for speaker in self.speakers:
            speaker.shutdown()
        for speaker in self.speakers:
            speaker.join(timeout=10)
        self.link.stop()
        return 0


BUILD_TIMEOUT_EXTENSION_S = 120


def _build_child(config: Config, store: Path, sender) -> None:
    """The build process: builds what is missing or damaged, sending ("progress", text) as it
    goes, then ("done", results) or ("error", message)."""
    from edge_build.build import build_voices

    try:
        results = build_voices(config, store, progress=lambda text: sender.send(("progress", text)))
        sender.send(("done", results))
    except (FastvoiceError, OSError) as error:
        sender.send(("error", str(error)))
    finally:
        sender.close()


def _follow_build(receiver, child) -> list:
    """Relays the build child's progress to systemd until it is done; its error, or its death
    without an answer, is a FastvoiceError."""
    extend = f"EXTEND_TIMEOUT_USEC={BUILD_TIMEOUT_EXTENSION_S * 1_000_000}"
    while True:
        if not receiver.poll(BUILD_TIMEOUT_EXTENSION_S / 4):
            sdnotify.notify(extend)  # a builder phase may be silent for a while
            continue
        try:
            message = receiver.recv()
        except EOFError:
            child.join()
            raise FastvoiceError(
                f"the build process ended without an answer (exit code {child.exitcode})"
            ) from None
        if message[0] == "progress":
            log.info("build: %s", message[1])
            sdnotify.notify(f"STATUS=building: {message[1]}\n{extend}")
        elif message[0] == "done":
            return message[1]
        else:
            raise FastvoiceError(message[1])


def serve(config_path: Path | None, wyoming: str | None = None, unregister: bool = False) -> int:
    """Runs the service; `wyoming` overrides `wyoming.uri`; `unregister` removes the Home
    Assistant entities instead, and exits."""
    from daemon.config import config_path_in_use

    path = config_path_in_use(config_path)
    config = load_config(path)
    if wyoming is not None:
        config = config.model_copy(update={"wyoming": WyomingConfig.checked(wyoming)})
    if unregister:
        count = unregister_discovery(config)
        print(f"removed {count} Home Assistant entities of node {node_id(config)!r}")
        return 0
    return Service(config, path).run()
