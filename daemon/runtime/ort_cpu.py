"""ONNX Runtime on the CPU, tuned for a small box.

Full graph optimisation, sequential execution, no memory pattern, intra-op threads equal to the
physical cores this process may use. Stock Piper uses a default session; these settings are
where the CPU backend earns its keep.

Concurrent requests (parallel workers): a run that has the CPU to itself uses the session with
every core's threads; runs that overlap use narrow sessions with a share of the cores each, so
that N requests at once do not oversubscribe the CPU (on 2 cores, two 1-thread sessions serve
about 1.2x the utterances of one 2-thread session). On a busy box a run takes only the cores
other processes leave free (daemon.runtime.cpu_load). All sessions of a process share one arena
(ONNX Runtime's environment allocator, daemon.runtime.cpu_arena), so idle sessions hold no
activation memory and an idle box gives the arena's memory back; the sessions of one artifact
share one mapping of its weights (daemon.runtime.shared_weights).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from daemon.errors import BackendError
from daemon.parts import WHOLE, part_kind
from daemon.runtime.artifacts import Artifact, find_artifact
from daemon.runtime.base import Backend, Precision, Stage, StageReport, ort_specs
from daemon.runtime.cpu_arena import IdleRelease, register_shared_arena
from daemon.runtime.cpu_load import FreeCores, allowed_cpus, sampled_load
from daemon.runtime.ort_values import run_keeping
from daemon.runtime.scheduling import MAX_WAIT_S, WaitingRun, next_in_line
from daemon.runtime.shared_weights import SharedWeights

log = logging.getLogger(__name__)

PROVIDER = "CPUExecutionProvider"
# The artifact edge_build writes for this backend, and the options it is built with.
ARTIFACT_KIND = "ort-optimized-onnx"
# "mapped once per process": the manifest lists where each weight lies (see shared_weights).
ARTIFACT_OPTIONS = {
    "graph_optimization_level": "all",
    "weights": "external, memory-mapped once per process",
}
# The quality gate's verdict for one source model: which precision `auto` loads, and why.
PRECISION_CHOICE_KIND = "ort-precision-choice"


def artifact_kind(part: str, precision: str = "fp32") -> str:
    """Artifacts may hold a whole graph or one part of it (e.g. a VITS encoder or decoder),
    in full precision or as a variant (`.../encoder@int8`)."""
    kind = part_kind(ARTIFACT_KIND, part)
    return kind if precision == "fp32" else f"{kind}@{precision}"


def physical_cores_available() -> int:
    """Physical cores, capped by the CPUs this process is allowed to run on (cgroups, taskset)."""
    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    return max(1, min(physical, len(allowed_cpus())))


def _shared_weights(artifact: Artifact | None) -> SharedWeights | None:
    """The artifact's weights mapped once for all its sessions; None for a source model (ONNX
    Runtime maps or reads its weights per session)."""
    table = artifact.manifest.get("initializers") if artifact is not None else None
    if artifact is None or table is None or "weights" not in artifact.manifest["files"]:
        return None
    return SharedWeights(artifact.directory / artifact.manifest["files"]["weights"]["name"], table)


class Load:
    """Requests in progress on one backend, whichever stage they are in; when the last one
    ends, `release` hears that the box is idle."""

    def __init__(self, release: IdleRelease | None = None) -> None:
        self.active = 0
        self.release = release
        self._lock = threading.Lock()

    @contextmanager
    def request(self) -> Iterator[None]:
        with self._lock:
            self.active += 1
            if self.release is not None:
                self.release.busy()
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1
                if self.active == 0 and self.release is not None:
                    self.release.idle()


class SessionPool:
    """Sessions of one graph, one per thread count a run may take: every thread for a run while
    no other request is in progress; a share (`threads / workers`) for runs while requests
    overlap (a request between two runs, phonemizing, still holds its share of the cores); and
    either one narrowed to the cores other processes leave free (`free_cores`, decided per run:
    no reload). At most `workers` runs are in flight; a further one waits for a session, and the
    runs waiting go in the order of daemon.runtime.scheduling (first audio, then the least work
    left; none starves).
    """

    def __init__(
        self,
        make: Callable[[int], object],
        threads: int,
        workers: int,
        load: Load,
        free_cores: Callable[[], int] | None = None,
    ) -> None:
        """Sessions other than the first are made when a run first needs their width: a start
        loads one session per stage, and a box that serves one request at a time on quiet
        cores never holds the others."""
        self.threads = threads
        self.workers = workers
        self.load = load
        self._make = make
        self._free_cores = free_cores or (lambda: threads)
        self.solo = make(threads)
        self._idle: dict[int, list[object]] = {threads: [self.solo]}
        self._made = collections.Counter({threads: 1})
        self._width: dict[int, int] = {id(self.solo): threads}
        self._in_flight = 0
        self._line: list[WaitingRun] = []
        self._tickets = itertools.count()
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._line)

    @property
    def made(self) -> dict[int, int]:
        """Sessions made so far, by their thread count."""
        with self._cond:
            return dict(self._made)

    def _wanted_width(self) -> int:
        """Every thread alone, a share when requests overlap, either one no wider than the
        free cores; rounded down to a width the pool keeps (every thread, the share, or a
        power of two), so that a stage holds a few widths, not one per core count."""
        alone = self._in_flight == 0 and self.load.active <= 1
        share = max(1, self.threads // self.workers)
        wanted = min(self.threads if alone else share, self._free_cores())
        if wanted in (self.threads, share):
            return wanted
        return 1 << (wanted.bit_length() - 1)

    def _pick(self):
        if self._in_flight >= self.workers:
            return None
        width = self._wanted_width()
        if self._idle.get(width):
            return self._idle[width].pop()
        # Fewer than `workers` runs are in flight, so fewer than `workers` of this width are
        # busy: none idle means another may be made.
        session = self._make(width)
        self._made[width] += 1
        self._width[id(session)] = width
        return session

    def acquire(self):
        with self._cond:
            waiting = WaitingRun.hinted(next(self._tickets))
            self._line.append(waiting)
            try:
                # Woken when a session comes back, and at times to see a long wait go first.
                while next_in_line(self._line) is not waiting or (session := self._pick()) is None:
                    self._cond.wait(MAX_WAIT_S / 4)
            except BaseException:  # a session could not be made: leave the line
                self._line.remove(waiting)
                self._cond.notify_all()
                raise
            self._line.remove(waiting)
            self._in_flight += 1
            self._cond.notify_all()  # the next in line may find a session too
            return session

    def release(self, session) -> None:
        with self._cond:
            self._in_flight -= 1
            self._idle.setdefault(self._width[id(session)], []).append(session)
            self._cond.notify_all()


class OrtCpuStage(Stage):
    def __init__(self, pool: SessionPool, report: StageReport) -> None:
        self.pool = pool
        self.report = report
        self.inputs = ort_specs(pool.solo.get_inputs())
        self.outputs = ort_specs(pool.solo.get_outputs())

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return self.run_kept(feeds, ())

    def run_kept(self, feeds: Mapping[str, Any], keep: Collection[str]) -> list[Any]:
        session = self.pool.acquire()
        try:
            if keep:
                return run_keeping(session, feeds, keep)
            return session.run(None, dict(feeds))
        except Exception as error:  # ORT raises its own exception types from C++
            raise BackendError(f"{self.report.stage}: inference failed: {error}") from error
        finally:
            self.pool.release(session)


class OrtCpuBackend(Backend):
    name = "ort-cpu"

    def __init__(
        self,
        threads: int | None = None,
        artifact_store: Path | None = None,
        workers: int = 1,
        precision: str = "auto",
        yield_busy_cores: bool = False,
    ) -> None:
        """`yield_busy_cores`: narrow each run to the cores other processes leave free (the
        service's default, `runtime.yield_busy_cores`); off, a run takes `threads` whatever
        else the box runs."""
        self.threads = threads or physical_cores_available()
        self.workers = workers
        self.free_cores = (
            FreeCores(self.threads, sampled_load(), physical_cores_available(), len(allowed_cpus()))
            if yield_busy_cores
            else None
        )
        self.artifact_store = artifact_store
        self.precision = precision
        self.requests = Load(IdleRelease())

    def request(self) -> AbstractContextManager[None]:
        return self.requests.request()

    def session_options(self, optimized: bool = False, threads: int | None = None):
        """Full optimisation, unless the graph is an artifact that was optimised at build time."""
        import onnxruntime as ort

        register_shared_arena()
        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            if optimized
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # A memory pattern is planned per input shape and kept: every sentence length adds one
        # to the arena (a Kokoro service grew 388 -> 468 MB over the bench's texts). Without
        # it the arena's chunks are reused from run to run, at the same speed.
        options.enable_mem_pattern = False
        options.intra_op_num_threads = threads or self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.use_env_allocators", "1")
        # Each session has its own thread pool. Spinning between the ops of a run saves a wake-up
        # per op (10% on a short sentence); a pool that went on spinning after its run would
        # starve the next session's (a VITS encoder then decoder, or parallel workers), so it
        # stops when the run ends.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        options.add_session_config_entry("session.force_spinning_stop", "1")
        options.log_severity_level = 3
        return options

    def _find(self, model_path: Path, kind: str) -> tuple[Artifact | None, str]:
        import onnxruntime as ort

        if self.artifact_store is None:
            return None, "artifacts disabled"
        return find_artifact(
            self.artifact_store,
            model_path,
            kind,
            ARTIFACT_OPTIONS,
            ort.__version__,
        )

    def find_artifact(
        self, model_path: Path, part: str = WHOLE, precision: str = "fp32"
    ) -> tuple[Artifact | None, str]:
        return self._find(model_path, artifact_kind(part, precision))

    def precision_choice(self, model_path: Path) -> tuple[Artifact | None, str]:
        """The quality gate's verdict for this model (written by `fastvoice build`)."""
        return self._find(model_path, PRECISION_CHOICE_KIND)

    def precision_for(self, model_path: Path) -> Precision:
        """The config's precision, or for `auto` the quality gate's choice made by `fastvoice
        build` on this box (fp32 until there is one) with what it let the voice approximate
        (nothing under `exact` or a precision the config names)."""
        if self.precision in ("fp32", "exact"):
            return Precision("fp32", f"{self.precision}: chosen in config")
        if self.precision != "auto":
            return Precision(self.precision, f"{self.precision}: chosen in config")
        choice, reason = self.precision_choice(model_path)
        if choice is None:
            return Precision("fp32", f"auto: fp32, no quality-gate result ({reason})")
        verdict = choice.manifest
        return Precision(
            verdict["chosen"], verdict["reason"], dict(verdict.get("approximations", {}))
        )

    def _artifact_for(
        self, model_path: Path, part: str, precision: Precision | None
    ) -> tuple[Artifact | None, str, Precision]:
        """(artifact, why it is or is not there, the precision it is at). A gate choice whose
        variant has since gone (pruned, truncated) falls back to fp32, never fails."""
        precision = precision or self.precision_for(model_path)
        artifact, reason = self.find_artifact(model_path, part, precision.name)
        if artifact is None and precision.name != "fp32" and self.precision == "auto":
            fallback = f"{precision.reason}; but {reason}, so fp32"
            precision = replace(precision, name="fp32", reason=fallback)
            artifact, reason = self.find_artifact(model_path, part)
        return artifact, reason, precision

    def has_part(self, model_path: Path, part: str, precision: Precision | None = None) -> bool:
        return self._artifact_for(model_path, part, precision)[0] is not None

    def load(
        self, model_path: Path, stage: str, part: str = WHOLE, precision: Precision | None = None
    ) -> Stage:
        import onnxruntime as ort

        artifact, reason, precision = self._artifact_for(model_path, part, precision)
        if artifact is None and precision.name != "fp32":
            raise BackendError(f"{stage}: {precision.name} was asked for but {reason}")
        if artifact is None and part != WHOLE:
            raise BackendError(f"{stage}: {reason}")
        if artifact is None and self.artifact_store is not None:
            log.warning("%s: %s; loading %s and optimising it now", stage, reason, model_path.name)
        graph = artifact.model if artifact is not None else model_path
        rss_before = psutil.Process().memory_info().rss
        started = time.perf_counter()

        try:
            weights = _shared_weights(artifact)
        except OSError as error:
            raise BackendError(f"{stage}: cannot map the weights of {graph}: {error}") from error

        def make(threads: int):
            options = self.session_options(artifact is not None, threads)
            if weights is not None:
                weights.add_to(options)
            session = ort.InferenceSession(str(graph), sess_options=options, providers=[PROVIDER])
            if weights is not None:
                weights.release_pages()
            return session

        try:
            pool = SessionPool(make, self.threads, self.workers, self.requests, self.free_cores)
        except Exception as error:
            raise BackendError(f"{stage}: cannot load {model_path}: {error}") from error
        load_s = time.perf_counter() - started
        providers = tuple(pool.solo.get_providers())
        if PROVIDER not in providers:
            raise BackendError(f"{stage}: asked for {PROVIDER}, ONNX Runtime gave {providers}")
        report = StageReport(
            stage=stage,
            backend=self.name,
            providers=providers,
            model_path=str(model_path),
            load_s=load_s,
            weights_bytes=sum(entry["size"] for entry in artifact.manifest["files"].values())
            if artifact is not None
            else graph.stat().st_size,
            load_rss_bytes=max(0, psutil.Process().memory_info().rss - rss_before),
            threads=self.threads,
            workers=self.workers,
            precision=precision.name,
            notes=(f"onnxruntime {ort.__version__}", precision.reason, reason),
        )
        return OrtCpuStage(pool, report)
