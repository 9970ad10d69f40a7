"""The service's first step on a box: build what `fastvoice build` would (missing or damaged
artifacts) in a child process, with its progress relayed to systemd. An up-to-date box starts no
child: a restart serves at once."""

from __future__ import annotations

import logging
from pathlib import Path

from daemon.box import sdnotify
from daemon.config import Config
from daemon.errors import FastvoiceError

log = logging.getLogger(__name__)

BUILD_TIMEOUT_EXTENSION_S = 120


def build_missing_artifacts(config: Config, gpu_in_play: bool) -> str | None:
    """Builds what is missing; None when all is well, else the problem (the voices then load
    their source models)."""
    runtime = config.runtime
    if not (runtime.artifacts and runtime.build_on_start):
        return None
    import multiprocessing

    from daemon.runtime.artifacts import default_store
    from edge_build.build import missing_artifacts

    sdnotify.notify("STATUS=checking artifacts for this box")
    store = runtime.artifact_dir or default_store()
    try:
        missing = missing_artifacts(config, store, gpu_in_play)
    except (FastvoiceError, OSError) as error:
        missing = [f"a check that failed ({error})"]
    if not missing:
        return None
    log.info("building %s", ", ".join(missing))
    # In a process of its own: a build and its quality gate peak at hundreds of MB that a
    # long-running service would otherwise keep. Its progress comes back over a pipe and goes
    # to systemd (only the main process may notify), each message extending the start timeout:
    # a TensorRT build on a Jetson takes minutes.
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_build_child, args=(config, store, sender))
    child.start()
    sender.close()
    try:
        results = follow_build(receiver, child)
    except (FastvoiceError, OSError) as error:
        problem = f"building artifacts failed: {error}"
        log.error("%s; loading the source models", problem)
        return problem
    finally:
        receiver.close()
        child.join()
    for result in results:
        if result.status != "up to date":
            log.info("%s: %s in %.1f s", result.stage, result.status, result.seconds)
    failed = [f"{result.voice}: {result.status}" for result in results if result.failed]
    if failed:
        problem = f"building artifacts failed: {'; '.join(failed)}"
        log.error("%s; loading the source models", problem)
        return problem
    return None


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


def follow_build(receiver, child) -> list:
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
