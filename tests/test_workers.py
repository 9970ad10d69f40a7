"""Parallel workers: a session pool per stage, serving overlapping requests side by side."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil
import pytest

from daemon.config import parse_config
from daemon.errors import ConfigError
from daemon.runtime import scheduling
from daemon.runtime.ort_cpu import Load, OrtCpuBackend, SessionPool, physical_cores_available
from daemon.runtime.select import create_backend
from daemon.service.settings import Settings
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry

pytestmark = pytest.mark.slow  # concurrent synthesis on every core

SILENT_NOISE = SpeechOptions(noise_scale=0.0, noise_w=0.0)
TEXTS = [
    "The next train to the airport leaves from platform four.",
    "Please keep your belongings with you at all times.",
    "Food and drinks are available in the middle car.",
]


class Session:
    """A stand-in for an ONNX Runtime session: the pool only hands sessions out."""

    def __init__(self, threads: int) -> None:
        self.threads = threads


def test_a_run_alone_gets_every_thread_overlapping_runs_a_share():
    pool = SessionPool(Session, threads=4, workers=2, load=Load())
    first = pool.acquire()
    second = pool.acquire()
    assert (first.threads, second.threads) == (4, 2)
    pool.release(first)
    third = pool.acquire()  # `second` still runs: this one overlaps too
    assert third.threads == 2 and third is not second
    pool.release(second)
    pool.release(third)
    assert pool.acquire() is first


def test_narrow_sessions_are_made_only_when_runs_overlap():
    made: list[Session] = []

    def make(threads: int) -> Session:
        made.append(Session(threads))
        return made[-1]

    pool = SessionPool(make, threads=4, workers=2, load=Load())
    for _ in range(3):  # one request at a time: the one session with every thread
        pool.release(pool.acquire())
    assert [session.threads for session in made] == [4]
    first, second = pool.acquire(), pool.acquire()
    assert [session.threads for session in made] == [4, 2]
    pool.release(second)
    pool.release(first)
    first, second = pool.acquire(), pool.acquire()
    assert len(made) == 2 and second is made[1]  # made once, then reused


def test_while_requests_overlap_even_a_lone_run_gets_a_share():
    load = Load()
    pool = SessionPool(Session, threads=4, workers=2, load=load)
    with load.request():
        assert pool.acquire().threads == 4  # one request: all the cores
        pool.release(pool.solo)
        with load.request():  # another request is phonemizing, between its runs
            narrow = pool.acquire()
            assert narrow.threads == 2
            pool.release(narrow)
        assert pool.acquire() is pool.solo


def test_runs_beyond_the_workers_wait_for_a_session():
    pool = SessionPool(Session, threads=2, workers=2, load=Load())
    held = [pool.acquire(), pool.acquire()]
    got: list[Session] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire()))
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive() and not got  # blocked while both sessions run
    pool.release(held[1])
    waiter.join(timeout=10)
    assert got == [held[1]]


def test_waiting_runs_are_served_in_arrival_order_and_none_jumps_the_line():
    pool = SessionPool(Session, threads=2, workers=1, load=Load())
    held = pool.acquire()
    served: list[str] = []

    def wait(name: str) -> None:
        session = pool.acquire()
        served.append(name)
        pool.release(session)

    waiters = []
    for name in ("first", "second", "third"):
        waiter = threading.Thread(target=wait, args=(name,))
        waiter.start()
        waiters.append(waiter)
        deadline = time.monotonic() + 10
        while pool.waiting < len(waiters) and time.monotonic() < deadline:
            time.sleep(0.001)  # until this one has joined the line
    assert pool.waiting == 3
    pool.release(held)
    pool.acquire()  # a later run asks at once: it must not jump the line
    assert served == ["first", "second", "third"]
    for waiter in waiters:
        waiter.join(timeout=10)


def test_one_worker_serialises_runs_on_one_session():
    pool = SessionPool(Session, threads=2, workers=1, load=Load())
    solo = pool.acquire()
    waiter = threading.Thread(target=pool.acquire)
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive()
    pool.release(solo)
    waiter.join(timeout=10)
    assert not waiter.is_alive()


def test_concurrent_requests_give_the_same_audio_as_one_at_a_time(config):
    backend = OrtCpuBackend(threads=2, workers=2)
    synthesizer = Synthesizer(VoiceRegistry(config, backend), Settings(config))

    def render(text: str) -> np.ndarray:
        return np.concatenate(
            [c.samples for c in synthesizer.synthesize(text, options=SILENT_NOISE)]
        )

    alone = [render(text) for text in TEXTS]
    with ThreadPoolExecutor(len(TEXTS)) as pool:
        together = list(pool.map(render, TEXTS))
    for one, other in zip(alone, together, strict=True):
        np.testing.assert_allclose(one, other, atol=1e-5)
    report = synthesizer.voices.get().info.stages[0]
    assert (report.threads, report.workers) == (2, 2)


def test_workers_from_config_only_for_the_service():
    config = parse_config({"runtime": {"workers": 3, "artifacts": False}})
    assert create_backend(config, concurrent=True)[0].workers == 3
    assert create_backend(config)[0].workers == 1
    auto = parse_config({"runtime": {"artifacts": False}})
    assert create_backend(auto, concurrent=True)[0].workers == physical_cores_available()


@pytest.mark.parametrize("value", [0, 65, "many"])
def test_bad_worker_count_names_the_key(value):
    with pytest.raises(ConfigError, match=r"runtime\.workers"):
        parse_config({"runtime": {"workers": value}})


LONG_SENTENCE = (
    "The train now arriving at platform four is the delayed service to the airport, calling at "
    "every station along the river, and passengers for the city center should change at the "
    "next stop for the express connection."
)


def test_an_idle_backend_gives_its_arena_back_and_speaks_the_same_after(config):
    backend = OrtCpuBackend(threads=2)
    release = backend.requests.release
    release.delay_s = 0.1
    synthesizer = Synthesizer(VoiceRegistry(config, backend), Settings(config))
    process = psutil.Process()

    def render() -> tuple[np.ndarray, int]:
        """The sentence's audio, and the memory given back once the request ended."""
        before = release.releases
        pieces, busy = [], 0
        for piece in synthesizer.synthesize(LONG_SENTENCE, options=SILENT_NOISE):
            pieces.append(piece.samples)
            busy = process.memory_info().rss  # the request is still in progress here
        with release.released:
            assert release.released.wait_for(lambda: release.releases > before, timeout=30)
        return np.concatenate(pieces), busy - process.memory_info().rss

    first, freed = render()
    assert freed > 50 * 2**20, f"only {freed / 2**20:.0f} MB given back"
    again, _ = render()
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_waiting_runs_go_first_audio_first_then_least_left(monkeypatch):
    """With the one session busy, runs that wait are handed it in the scheduler's order, not
    their arrival's: a request's first audio, then the request with the least work left."""
    pool = SessionPool(Session, threads=2, workers=1, load=Load())
    busy = pool.acquire()
    served: list[str] = []

    def run(name: str, remaining: int, first_audio: bool) -> None:
        scheduling.before_run(remaining, first_audio)
        session = pool.acquire()
        served.append(name)
        pool.release(session)

    arrivals = [("long rest", 900, False), ("short rest", 40, False), ("newcomer", 700, True)]
    threads = []
    for arrival in arrivals:
        threads.append(threading.Thread(target=run, args=arrival))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while pool.waiting < len(threads):  # each in line before the next arrives
            assert time.monotonic() < deadline
            time.sleep(0.001)
    pool.release(busy)
    for thread in threads:
        thread.join(10)
    assert served == ["newcomer", "short rest", "long rest"]


def test_a_run_that_waited_long_goes_before_any_other():
    now = time.monotonic()
    starving = scheduling.WaitingRun(0, remaining=5000, first_audio=False)
    starving.since = now - scheduling.MAX_WAIT_S
    newcomer = scheduling.WaitingRun(1, remaining=10, first_audio=True)
    assert scheduling.next_in_line([newcomer, starving]) is starving


def test_a_hint_holds_for_one_run_only():
    scheduling.before_run(300, first_audio=False)
    hinted = scheduling.WaitingRun.hinted(0)
    unhinted = scheduling.WaitingRun.hinted(1)
    assert (hinted.remaining, hinted.first_audio) == (300, False)
    assert (unhinted.remaining, unhinted.first_audio) == (0, True)
