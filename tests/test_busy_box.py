"""A busy box: runs take only the cores other processes leave free, decided per run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

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


def step(counters: Counters, load: OtherLoad, busy_cores: float, own_cores: float) -> None:
    """One sampling interval passes, with this load, and the sampler reads the counters."""
    counters.advance(cpu_load.SAMPLE_EVERY_S, busy_cores, own_cores)
    load.sample()


def test_the_load_counts_other_processes_and_not_this_one():
    counters = Counters()
    load = counters.load()
    load.sample()
    assert load.cores() == 0.0  # one reading: nothing to compare yet
    for _ in range(cpu_load.WINDOW_SAMPLES):
        step(counters, load, busy_cores=2.0, own_cores=1.0)
    assert load.cores() == pytest.approx(1.0)
    for _ in range(cpu_load.WINDOW_SAMPLES):  # this process takes both cores: nobody else
        step(counters, load, busy_cores=2.0, own_cores=2.0)
    assert load.cores() == pytest.approx(0.0)


def test_a_burst_that_has_ended_does_not_count_a_load_that_holds_does():
    counters = Counters()
    load = counters.load()
    load.sample()
    for _ in range(cpu_load.WINDOW_SAMPLES):  # another process's request, ended just now
        step(counters, load, busy_cores=1.0, own_cores=0.0)
    step(counters, load, busy_cores=0.0, own_cores=0.0)
    assert load.cores() == pytest.approx(0.0)
    for _ in range(cpu_load.WINDOW_SAMPLES - 1):  # a recorder that keeps a core busy
        step(counters, load, busy_cores=1.0, own_cores=0.0)
    assert load.cores() == pytest.approx(1.0)


def test_the_load_is_of_the_last_intervals_only():
    counters = Counters()
    load = counters.load()
    load.sample()
    counters.advance(60, busy_cores=1.0, own_cores=0.0)  # a minute with another process busy
    load.sample()
    assert load.cores() == pytest.approx(1.0)
    for _ in range(cpu_load.WINDOW_SAMPLES - 1):  # it stopped
        step(counters, load, busy_cores=0.0, own_cores=0.0)
    assert load.cores() == pytest.approx(0.0)


def test_unreadable_counters_leave_every_core():
    def broken() -> int:
        raise OSError("no /proc here")

    load = OtherLoad(cpus={0}, busy_ticks=broken, own_ticks=broken)
    load.sample()
    load.sample()
    assert load.cores() == 0.0
    assert FreeCores(4, load, logical_cpus=4)() == 4


@pytest.mark.parametrize(
    ("threads", "logical", "others", "free"),
    [
        (2, 2, 0.0, 2),
        (2, 2, 0.3, 2),  # a little background work: not worth a thread
        (2, 2, 0.6, 1),
        (2, 2, 1.0, 1),
        (2, 2, 2.0, 1),  # never fewer than one
        (4, 4, 1.0, 3),
        (2, 4, 1.0, 1),  # two hardware threads a core: a busy CPU is half a core
        (4, 8, 1.0, 3),
        (4, 8, 0.8, 4),
    ],
)
def test_free_cores(threads, logical, others, free):
    class Fixed(OtherLoad):
        def cores(self) -> float:
            return others

    assert FreeCores(threads, Fixed(cpus={0}), logical_cpus=logical)() == free


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


def test_the_counters_read_from_proc_see_this_process_work():
    """The parsers against the real /proc: busy time over this process's CPUs grows at least
    by this process's own while it spins a core."""
    cpus = allowed_cpus()
    busy, own = read_busy_ticks(cpus), read_own_ticks()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    own_grew = read_own_ticks() - own
    assert own_grew >= 0.2 * cpu_load.TICKS_PER_S
    assert read_busy_ticks(cpus) - busy >= own_grew - 2  # ticks are counted per CPU, rounded


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


def wait_for_load(load: OtherLoad, cores: float, timeout_s: float = 10.0) -> float:
    """Samples until `load` reaches `cores` (or the time is up), returning the last figure."""
    deadline = time.monotonic() + timeout_s
    while (seen := load.cores()) < cores and time.monotonic() < deadline:
        time.sleep(cpu_load.SAMPLE_EVERY_S / 2)
        load.sample()
    return seen


def test_another_process_spinning_a_core_is_seen(spinning_process):
    load = OtherLoad()
    load.sample()
    assert wait_for_load(load, 0.8) >= 0.8


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_voice_on_a_busy_box_runs_narrow_and_says_the_same(config, spinning_process):
    """The real voice through a backend that yields busy cores: with one of two cores taken,
    its runs use a one-thread session, and the audio is the audio of a quiet box."""
    text = "The next train to the airport leaves from platform four."
    silent = SpeechOptions(noise_scale=0.0, noise_w=0.0)
    quiet = Synthesizer(VoiceRegistry(config, OrtCpuBackend(threads=2)), Settings(config))
    expected = np.concatenate([c.samples for c in quiet.synthesize(text, options=silent)])

    backend = OrtCpuBackend(threads=2, yield_busy_cores=True)
    load = cpu_load.sampled_load()
    assert wait_for_load(load, 0.8) >= 0.8
    if len(allowed_cpus()) > 2:  # on a larger box one spinning core leaves two free
        backend.free_cores = FreeCores(2, load, logical_cpus=2)
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
