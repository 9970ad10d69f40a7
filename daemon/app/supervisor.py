"""The main thread of `fastvoice serve`: signals (SIGTERM stops, SIGHUP reloads the config), the
systemd watchdog (pinged only while every lane is alive and progressing) and periodic stats."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

import psutil

from daemon.app.lifecycle import Service
from daemon.box import sdnotify
from daemon.config import Config
from daemon.errors import FastvoiceError

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self, service: Service, load: Callable[[], Config]) -> None:
        """`load` reads the config as the service was started with it (a reload calls it)."""
        self.service = service
        self.load = load
        # Set by the signal handlers, which take no lock: an Event's set() from a handler can
        # deadlock when the signal lands while the main thread holds that Event's lock.
        self._stop_requested = False
        self._reload_requested = False
        self._stall_reported = False

    def run(self) -> int:
        # A signal also writes a byte here (from C), which wakes the loop's select at once.
        wake, woken_by = socket.socketpair()
        for end in (wake, woken_by):
            end.setblocking(False)
        signal.set_wakeup_fd(woken_by.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        self.service.start()
        watchdog = sdnotify.watchdog_interval_s()
        tick = min(1.0, watchdog or 1.0)
        next_stats = time.monotonic() + self.config.mqtt.stats_interval_s
        while not self._stop_requested:
            select.select([wake], [], [], tick)
            with contextlib.suppress(BlockingIOError):
                while wake.recv(512):
                    pass
            if self._stop_requested:
                break
            if self._reload_requested:
                self._reload_requested = False
                self.reload()
                next_stats = min(next_stats, time.monotonic() + self.config.mqtt.stats_interval_s)
            if watchdog is not None:
                self._watchdog()
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + self.config.mqtt.stats_interval_s
                self.service.outbox.publish_json("stats", self.stats())
                self.service.refresh_info()
        self.service.stop()
        return 0

    @property
    def config(self) -> Config:
        """The config in force."""
        return self.service.settings.config

    def request_stop(self, *_: Any) -> None:
        self._stop_requested = True

    def request_reload(self, *_: Any) -> None:
        self._reload_requested = True

    def reload(self) -> None:
        try:
            loaded = self.load()
        except FastvoiceError as error:
            log.error("config reload refused, keeping the old config: %s", error)
            sdnotify.notify(f"STATUS=config reload refused: {str(error).splitlines()[0]}")
            self.service.refuse_reload(str(error))
            return
        report = self.service.settings.reload(loaded)
        self.service.apply(report)
        if report.restart_needed:
            log.warning("take effect after a restart: %s", ", ".join(report.restart_needed))
        log.info("config reloaded: %s", ", ".join(report.changed) or "nothing changed")
        sdnotify.notify("STATUS=config reloaded")

    def stats(self) -> dict[str, Any]:
        backend = self.service.voices.backend
        return {
            "v": 1,
            **self.service.events.job_stats(),
            "queue_depth": len(self.service.queue),
            "rss_bytes": psutil.Process().memory_info().rss,
            "gpu_memory": backend.gpu_memory(),
        }

    def stalled(self) -> list[str]:
        """Lanes that died, or that have made no progress on a job for `stall_limit_s` (idle
        ones beat while they wait; paused ones are excused)."""
        now, limit = time.monotonic(), self.config.queue.stall_limit_s
        paused = self.service.queue.paused
        return [
            lane.name
            for lane in self.service.lanes
            if not lane.is_alive() or (now - lane.heartbeat > limit and not paused)
        ]

    def _watchdog(self) -> None:
        stalled = self.stalled()
        if not stalled:
            if self._stall_reported:
                log.warning("lanes progress again; watchdog pings resume")
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
