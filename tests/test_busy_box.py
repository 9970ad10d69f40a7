"""A busy box: runs take only the cores other processes leave free, decided per run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from daemon.config import parse_config
from daemon.runtime import cpu_load
from daemon.runtime.cpu_load import (
    FreeCores,
    OtherLoad,
    allowed_cpus,
    read_busy_ticks,
    read_own_ticks,
)
from daemon.runtime.ort_cpu import Load, OrtCpuBackend, SessionPool
from daemon.runtime.select import create_backend
from daemon.service.settings import Settings
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry

pytestmark = pytest.mark.skipif(
    not Path("/proc/stat").exists() or not hasattr(os, "sched_setaffinity"),
    reason="the busy box is measured from Linux's /proc",
)


class Session:
    """A stand-in for an ONNX Runtime session: the pool only hands sessions out."""

    def __init__(self, threads: int) -> None:
        self.threads = threads


class Counters:
    """/proc's counters as a test sets them: busy ticks of the box, of this process, a clock."""

    def __init__(self) -> None:
        self.busy = self.own = 0
        self.now = 0.0

    def load(self) -> OtherLoad:
        return OtherLoad(
            cpus={0, 1},
            busy_ticks=lambda: self.busy,
            own_ticks=lambda: self.own,
            clock=lambda: self.now,
        )

    def advance(self, seconds: float, busy_cores: float, own_cores: float) -> None:
        """`seconds` pass with `busy_cores` busy in all, `own_cores` of them this process's."""
        self.now += seconds
        self.busy += round(busy_cores * seconds * cpu_load.TICKS_PER_S)
        self.own += round(own_cores * seconds * cpu_load.TICKS_PER_S)


def hold(
    counters: Counters,
    load: OtherLoad,
    busy_cores: float,
    own_cores: float,
    intervals: int = cpu_load.WINDOW_SAMPLES,
) -> None:
    """`intervals` sampling intervals pass with this load, the sampler reading the counters
    after each."""
    for _ in range(intervals):
        counters.advance(cpu_load.SAMPLE_EVERY_S, busy_cores, own_cores)
        load.sample()


def test_the_load_counts_other_processes_and_not_this_one():
    counters = Counters()
    load = counters.load()
    load.sample()
    assert load.cores() == 0.0  # one reading: nothing to compare yet
    hold(counters, load, busy_cores=2.0, own_cores=1.0)
    assert load.cores() == pytest.approx(1.0)
    hold(counters, load, busy_cores=2.0, own_cores=2.0)  # this process takes both cores
    assert load.cores() == pytest.approx(0.0)


def test_a_burst_that_has_ended_does_not_count_a_load_that_holds_does():
    counters = Counters()
    load = counters.load()
    load.sample()
    hold(counters, load, busy_cores=1.0, own_cores=0.0)  # another process's request...
    hold(counters, load, busy_cores=0.0, own_cores=0.0, intervals=1)  # ... ended just now
    assert load.cores() == pytest.approx(0.0)
    intervals = cpu_load.WINDOW_SAMPLES - 1
    hold(counters, load, busy_cores=1.0, own_cores=0.0, intervals=intervals)  # a recorder
    assert load.cores() == pytest.approx(1.0)


def test_the_load_is_of_the_last_intervals_only():
    counters = Counters()
    load = counters.load()
    load.sample()
    counters.advance(60, busy_cores=1.0, own_cores=0.0)  # a minute with another process busy
    load.sample()
    assert load.cores() == pytest.approx(1.0)
    intervals = cpu_load.WINDOW_SAMPLES - 1
    hold(counters, load, busy_cores=0.0, own_cores=0.0, intervals=intervals)  # it stopped
    assert load.cores() == pytest.approx(0.0)


def test_unreadable_counters_leave_every_core():
    def broken() -> int:
        raise OSError("no /proc here")

    load = OtherLoad(cpus={0}, busy_ticks=broken, own_ticks=broken)
    load.sample()
    load.sample()
    assert load.cores() == 0.0
    assert FreeCores(4, load, cores=4, logical_cpus=4)() == 4


@pytest.mark.parametrize(
    ("threads", "cores", "logical", "others", "free"),
    [
        (2, 2, 2, 0.0, 2),
        (2, 2, 2, 0.3, 2),  # a little background work: not worth a thread
        (2, 2, 2, 0.6, 1),
        (2, 2, 2, 1.0, 1),
        (2, 2, 2, 2.0, 1),  # never fewer than one
        (4, 4, 4, 1.0, 3),
        (2, 2, 4, 1.0, 1),  # two hardware threads a core: a busy CPU is half a core
        (4, 4, 8, 1.0, 3),
        (4, 4, 8, 0.8, 4),
        (4, 8, 8, 1.0, 4),  # `threads: 4` on 8 cores: one busy leaves the 4 it asked for
        (4, 8, 8, 5.0, 3),
    ],
)
def test_free_cores(threads, cores, logical, others, free):
    class Fixed(OtherLoad):
        def cores(self) -> float:
            return others

    assert FreeCores(threads, Fixed(cpus={0}), cores=cores, logical_cpus=logical)() == free


def test_a_run_on_a_busy_box_gets_the_free_cores_and_every_core_once_it_is_quiet():
    free = [2]
    made: list[Session] = []

    def make(threads: int) -> Session:
        made.append(Session(threads))
        return made[-1]

    pool = SessionPool(make, threads=2, workers=1, load=Load(), free_cores=lambda: free[0])
    solo = pool.acquire()
    assert solo.threads == 2
    pool.release(solo)
    free[0] = 1  # another process took a core
    narrow = pool.acquire()
    assert narrow.threads == 1
    pool.release(narrow)
    assert pool.acquire() is narrow  # made once, then reused
    pool.release(narrow)
    free[0] = 2
    assert pool.acquire() is solo
    assert [session.threads for session in made] == [2, 1]


def test_overlapping_runs_on_a_busy_box_take_no_more_than_the_free_cores():
    free = [4]
    pool = SessionPool(Session, threads=4, workers=2, load=Load(), free_cores=lambda: free[0])
    first = pool.acquire()
    assert first.threads == 4
    free[0] = 1
    second = pool.acquire()  # its share would be 2, but one core is free
    assert second.threads == 1
    pool.release(first)
    pool.release(second)


def test_one_thread_sessions_serve_every_worker_at_once():
    pool = SessionPool(Session, threads=1, workers=2, load=Load())
    first, second = pool.acquire(), pool.acquire()
    assert first is not second and (first.threads, second.threads) == (1, 1)


def test_a_stage_keeps_few_widths_and_a_narrowed_run_never_gets_a_wider_session():
    """On 8 threads the busy box asks 7, 6, 5, ... : each is rounded down to a width the pool
    keeps (every thread, the share, a power of two)."""
    free = [8]
    pool = SessionPool(Session, threads=8, workers=2, load=Load(), free_cores=lambda: free[0])
    for cores in range(8, 0, -1):
        free[0] = cores
        session = pool.acquire()
        assert session.threads <= cores
        pool.release(session)
    assert set(pool.made) == {8, 4, 2, 1}


def test_the_counters_read_from_proc_see_this_process_work():
    """The parsers against the real /proc: busy time over this process's CPUs grows at least
    by this process's own while it spins a core."""
    cpus = allowed_cpus()
    columns = cpu_load.busy_columns()
    busy, own = read_busy_ticks(cpus, columns=columns), read_own_ticks()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    own_grew = read_own_ticks() - own
    assert own_grew >= 0.2 * cpu_load.TICKS_PER_S
    grew = read_busy_ticks(cpus, columns=columns) - busy
    assert grew >= own_grew - 2  # ticks are counted per CPU, rounded


def test_the_counters_parse_proc_files_as_the_kernel_writes_them(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  900 50 300 5000 40 10 20 5 0 0\n"
        "cpu0 100 10 30 2000 20 1 2 3 0 0\n"
        "cpu1 200 20 60 2000 20 4 5 6 0 0\n"
        "cpu3 400\n"  # a short line: its columns that are there
        "intr 1 2 3\nctxt 5\nprocs_running 3\n"
    )
    # user + system + irq + softirq + steal; niced time only when asked
    assert read_busy_ticks({0}, stat) == 100 + 30 + 1 + 2 + 3
    assert read_busy_ticks({0, 1, 3}, stat) == 136 + (200 + 60 + 4 + 5 + 6) + 400
    assert read_busy_ticks({0}, stat, columns=(*cpu_load.BUSY_COLUMNS, 1)) == 146
    # CPUs the file does not list (a container's own numbering): the whole box's line
    assert read_busy_ticks({7, 8}, stat) == 900 + 300 + 10 + 20 + 5
    own = tmp_path / "self-stat"
    own.write_text("4242 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 9\n")
    assert read_own_ticks(own) == 111 + 222


@pytest.fixture
def spinning_process():
    """Another process keeping one of this process's CPUs busy, as a recorder or a database
    would."""
    cpu = min(allowed_cpus())
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    process = subprocess.Popen([sys.executable, "-c", code])
    yield process
    process.kill()
    process.wait()


def wait_for_load(load: OtherLoad, cores: float, sample: bool, timeout_s: float = 10.0) -> float:
    """Waits until `load` reaches `cores` (or the time is up), sampling it one interval apart
    where `sample` (the process's own sampler thread samples the shared one), returning the
    last figure."""
    deadline = time.monotonic() + timeout_s
    while (seen := load.cores()) < cores and time.monotonic() < deadline:
        time.sleep(cpu_load.SAMPLE_EVERY_S)
        if sample:
            load.sample()
    return seen


def test_another_process_spinning_a_core_is_seen(spinning_process):
    """Measured over the spinner's own CPU only: another test process on the box may add to
    it, but cannot make it."""
    load = OtherLoad(cpus={min(allowed_cpus())})
    load.sample()
    assert wait_for_load(load, 0.5, sample=True) >= 0.5


def test_a_voice_on_a_busy_box_runs_narrow_and_says_the_same(config, spinning_process):
    """The real voice through a backend that yields busy cores: with one of two cores taken,
    its runs use a one-thread session, and the audio is the audio of a quiet box."""
    text = "The next train to the airport leaves from platform four."
    silent = SpeechOptions(noise_scale=0.0, noise_w=0.0)
    quiet = Synthesizer(VoiceRegistry(config, OrtCpuBackend(threads=2)), Settings(config))
    expected = np.concatenate([c.samples for c in quiet.synthesize(text, options=silent)])

    backend = OrtCpuBackend(threads=2, yield_busy_cores=True)
    load = cpu_load.sampled_load()
    assert wait_for_load(load, 0.5, sample=False) >= 0.5
    if len(allowed_cpus()) > 2:  # on a larger box one spinning core leaves two free
        backend.free_cores = FreeCores(2, load, cores=2, logical_cpus=2)
    busy = Synthesizer(VoiceRegistry(config, backend), Settings(config))
    assert backend.free_cores() == 1
    said = np.concatenate([c.samples for c in busy.synthesize(text, options=silent)])
    np.testing.assert_allclose(said, expected, atol=1e-5)
    assert busy.voices.get().whole.pool.made == {2: 1, 1: 1}  # no artifacts: one whole graph


def test_the_service_yields_busy_cores_unless_told_not_to():
    on = create_backend(parse_config({"runtime": {"artifacts": False}}), concurrent=True)[0]
    assert on.free_cores is not None
    off = parse_config({"runtime": {"artifacts": False, "yield_busy_cores": False}})
    assert create_backend(off, concurrent=True)[0].free_cores is None


def test_the_sampler_thread_runs_once_per_process():
    first = cpu_load.sampled_load()
    assert cpu_load.sampled_load() is first
    samplers = [t for t in threading.enumerate() if t.name == "fastvoice-cpu-load"]
    assert len(samplers) == 1 and samplers[0].daemon
