"""The cores other processes keep busy, so that a run takes only the cores they leave free.

An edge box often runs more than the voice: Home Assistant, a database, a camera recorder. An
ONNX Runtime session with a thread per core waits at every op for its slowest thread, and a
thread that shares its core with another process is the slowest: with one of two cores held by
another process, joe's decoder ran in twice its quiet time on two threads, and in 0.76-0.84x of
that on one (issue 54). So before each run the session pool asks how many of its cores the rest
of the box is using: the kernel's per-CPU busy time (/proc/stat) over the CPUs this process may
run on, less this process's own CPU time (/proc/self/stat), sampled by one thread per process
ten times a second (two small reads of /proc), and taken as the least over each of the last
three tenths of a second: a load that holds narrows the next run, a burst that has ended does
not. A run narrowed for nothing costs more than one that shares a core for a moment: on a quiet
2-core box one thread took about 1.8x the time of two, and with the load read over the last
half second (the other process's last request still in it) a Wyoming request took 1.6x.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path

SAMPLE_EVERY_S = 0.1
WINDOW_SAMPLES = 4  # three intervals: the load must hold through each of them
# /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq steal.
# Busy: user, system, irq, softirq and steal (the hypervisor gave the core to someone else).
# Not nice: a niced job (a backup, an indexer at nice 19) yields its core to a run at once;
# unless this process is niced itself (its own time is counted there, and subtracted).
BUSY_COLUMNS = (0, 2, 5, 6, 7)
NICE_COLUMN = 1
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cpus() -> frozenset[int]:
    """The logical CPUs this process may run on (cgroups' cpusets and taskset narrow them)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:
        return frozenset(range(os.cpu_count() or 1))


def busy_columns() -> tuple[int, ...]:
    """The columns of /proc/stat that count as busy for this process (see BUSY_COLUMNS)."""
    niced = hasattr(os, "nice") and os.nice(0) > 0
    return (*BUSY_COLUMNS, NICE_COLUMN) if niced else BUSY_COLUMNS


def read_busy_ticks(
    cpus: Collection[int],
    stat: Path = Path("/proc/stat"),
    columns: tuple[int, ...] = BUSY_COLUMNS,
) -> int:
    """Busy clock ticks, summed over `cpus`, since the box started. Where /proc/stat lists
    none of them (a container whose /proc numbers its CPUs from 0), the whole box's line."""
    total, matched, whole = 0, False, 0
    for line in stat.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu"):
            continue
        counts = rest.split()
        busy = sum(int(counts[i]) for i in columns if i < len(counts))
        if name == "cpu":
            whole = busy
        elif name[3:].isdigit() and int(name[3:]) in cpus:
            total, matched = total + busy, True
    return total if matched else whole


def read_own_ticks(stat: Path = Path("/proc/self/stat")) -> int:
    """This process's CPU time (user and system, every thread), in clock ticks."""
    # The command name in parentheses may hold spaces: the fields count from its end.
    fields = stat.read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


class OtherLoad:
    """How many cores other processes keep busy, as a moving measure; 0 where /proc cannot be
    read (not Linux), so the pool keeps every core."""

    def __init__(
        self,
        cpus: Collection[int] | None = None,
        busy_ticks: Callable[[], int] | None = None,
        own_ticks: Callable[[], int] = read_own_ticks,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        cpus = frozenset(cpus if cpus is not None else allowed_cpus())
        counted = busy_columns()
        self._busy_ticks = busy_ticks or (lambda: read_busy_ticks(cpus, columns=counted))
        self._own_ticks = own_ticks
        self._clock = clock
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=WINDOW_SAMPLES)
        self._lock = threading.Lock()

    def sample(self) -> bool:
        """Takes one reading of the counters (the sampler thread's step; tests call it); False
        where they cannot be read."""
        try:
            reading = (self._clock(), self._busy_ticks(), self._own_ticks())
        except (OSError, ValueError, IndexError):
            return False
        with self._lock:
            self._samples.append(reading)
        return True

    def cores(self) -> float:
        """Cores other processes kept busy through each interval of the window (0 before two
        readings)."""
        with self._lock:
            samples = list(self._samples)
        loads = [
            (busy1 - busy0 - (own1 - own0)) / TICKS_PER_S / (end - start)
            for (start, busy0, own0), (end, busy1, own1) in itertools.pairwise(samples)
            if end > start
        ]
        return max(0.0, min(loads)) if loads else 0.0


class FreeCores:
    """The intra-op threads a run may take now: the physical `cores` this process may use, less
    those other processes keep busy (half a core or more counts as one), at most `threads` and
    never fewer than one."""

    def __init__(self, threads: int, load: OtherLoad, cores: int, logical_cpus: int) -> None:
        self.threads = threads
        self.cores = cores
        self.load = load
        # On a box with two hardware threads per core, a busy logical CPU is half a core.
        self._cores_per_cpu = min(1.0, cores / max(1, logical_cpus))

    def __call__(self) -> int:
        taken = math.floor(self.load.cores() * self._cores_per_cpu + 0.5)
        return max(1, min(self.threads, self.cores - taken))


_sampled: OtherLoad | None = None
_started = threading.Lock()


def sampled_load() -> OtherLoad:
    """The process's one measure of other processes' load over the CPUs it may use, with its
    sampler thread started on first use (a daemon thread: it ends with the process)."""
    global _sampled
    with _started:
        if _sampled is None:
            _sampled = OtherLoad()
            threading.Thread(
                target=_sample_forever, args=(_sampled,), name="fastvoice-cpu-load", daemon=True
            ).start()
        return _sampled


def _sample_forever(load: OtherLoad) -> None:
    """Samples until the counters cannot be read (not Linux): every core is then free."""
    while load.sample():
        time.sleep(SAMPLE_EVERY_S)
