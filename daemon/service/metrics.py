"""Prometheus metrics of the running service: jobs and their latencies as they end (observed
beside each event), and the state read at each scrape (queue, memory, broker, backends)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.service.jobs import Job

LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0)
RTF_BUCKETS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
OUTCOMES = ("queued", "rejected", "finished", "failed", "interrupted")


class Metrics:
    """One registry per service. `state` is read at each scrape: the queue depth, whether the
    broker is connected, the backend of each stage and the GPU memory where it is known."""

    def __init__(self, state: Callable[[], dict[str, Any]]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.state = state
        self.jobs = Counter(
            "fastvoice_jobs",
            "Job events by outcome and priority",
            ["outcome", "priority"],
            registry=self.registry,
        )
        self.first_audio = Histogram(
            "fastvoice_first_audio_seconds",
            "From a job's start to its first audio",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.synthesis = Histogram(
            "fastvoice_synthesis_seconds",
            "Time spent synthesizing a job",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.rtf = Histogram(
            "fastvoice_real_time_factor",
            "Synthesis time over audio time, per job",
            buckets=RTF_BUCKETS,
            registry=self.registry,
        )
        self.cache = Counter(
            "fastvoice_phrase_cache", "Finished jobs by phrase cache result", ["result"],
            registry=self.registry,
        )  # fmt: skip
        self.registry.register(_StateCollector(self))

    def observe(self, message: dict[str, Any], job: Job | None) -> None:
        """An event beside its job (an EventSink observer)."""
        outcome = message["event"]
        if outcome not in OUTCOMES:
            return
        priority = job.command.priority if job is not None else "unknown"
        self.jobs.labels(outcome=outcome, priority=priority).inc()
        if outcome != "finished":
            return
        if "first_audio_s" in message:
            self.first_audio.observe(message["first_audio_s"])
        if "synthesis_s" in message:
            self.synthesis.observe(message["synthesis_s"])
            self.rtf.observe(message["rtf"])
            self.cache.labels(result="hit" if message.get("cache_hit") else "miss").inc()

    def scrape(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _StateCollector:
    """Gauges read when scraped, from the service's state."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list:
        return []

    def collect(self):
        import psutil
        from prometheus_client.core import GaugeMetricFamily

        state = self.metrics.state()
        yield GaugeMetricFamily("fastvoice_queue_depth", "Jobs waiting", value=state["queued"])
        yield GaugeMetricFamily(
            "fastvoice_playing", "Jobs being spoken or rendered now", value=state["playing"]
        )
        yield GaugeMetricFamily(
            "fastvoice_broker_connected",
            "1 while the MQTT broker connection is up",
            value=1 if state["broker_connected"] else 0,
        )
        yield GaugeMetricFamily(
            "fastvoice_resident_memory_bytes",
            "Resident memory of the service",
            value=psutil.Process().memory_info().rss,
        )
        stages = GaugeMetricFamily(
            "fastvoice_stage_backend",
            "1 for the backend each voice stage runs on",
            labels=["stage", "backend", "precision"],
        )
        for stage in state["stages"]:
            stages.add_metric([stage["stage"], stage["backend"], stage["precision"]], 1)
        yield stages
        broken = GaugeMetricFamily(
            "fastvoice_voice_broken",
            "1 for each voice that cannot load or speak (quarantined; the others go on)",
            labels=["voice"],
        )
        for name in state["broken_voices"]:
            broken.add_metric([name], 1)
        yield broken
        gpu_bytes = state.get("gpu_memory_bytes")
        if gpu_bytes is not None:
            yield GaugeMetricFamily(
                "fastvoice_gpu_memory_bytes", "GPU memory fastvoice holds", value=gpu_bytes
            )
