"""Pick the backend named in config, or the best one this box has for `auto`."""

from __future__ import annotations

from daemon.config import RuntimeConfig
from daemon.runtime.artifacts import default_store
from daemon.runtime.base import Backend
from daemon.runtime.ort_cpu import OrtCpuBackend, physical_cores_available


def create_backend(config: RuntimeConfig, concurrent: bool = False) -> tuple[Backend, str]:
    """Returns the backend and a one-line reason, logged and shown in status.

    `concurrent`: whether requests may overlap (the service), so parallel workers pay off;
    a one-shot command serves one request and loads one session per stage. The service, which
    loads once and runs for months, also verifies every artifact's sha256 before loading it.
    """
    threads = None if config.threads == "auto" else config.threads
    workers = 1
    if concurrent:
        workers = physical_cores_available() if config.workers == "auto" else config.workers
    store = (config.artifact_dir or default_store()) if config.artifacts else None
    backend = OrtCpuBackend(
        threads=threads,
        artifact_store=store,
        workers=workers,
        precision=config.precision,
        verify_artifacts=concurrent,
    )
    if config.backend == "auto":
        return backend, "auto: ort-cpu is the only backend in this install"
    return backend, f"{config.backend}: chosen in config"
