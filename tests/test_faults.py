"""Faults injected into a running service: a hung synthesis, broken disks, a lost broker, a lost
audio device. The service must say what happened, keep serving what it can, and lose nothing it
accepted."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.daemon_helpers import Daemon, say


def test_a_hung_synthesis_withholds_the_watchdog_so_systemd_restarts(broker, capture, tmp_path):
    env = {**capture.env(), "FASTVOICE_FAULTS": "hang-synthesis=FREEZE"}
    daemon = Daemon(broker, tmp_path, env, queue={"stall_limit_s": 2})
    try:
        daemon.notifications(until="WATCHDOG=1")  # healthy: pinged
        job = say(daemon, text="FREEZE here.")
        daemon.recorder.event(job, "started")
        stalled = daemon.notifications(until="STATUS=speaker stalled")
        assert (
            stalled[-1] == "STATUS=speaker stalled (no progress for 2 s); watchdog pings withheld"
        )
        # The hang is permanent: no ping may follow (the main loop ticks every second).
        daemon.notify.settimeout(4)
        with pytest.raises(socket.timeout):
            while True:
                assert daemon.notify.recv(4096) != b"WATCHDOG=1"
        assert daemon.log_says("systemd will restart the service")
    finally:
        daemon.stop()


def test_jobs_accepted_before_a_crash_are_spoken_after_the_restart(broker, capture, tmp_path):
    """systemd's answer to the hang above is SIGKILL and a new process: nothing accepted is lost."""
    env = {**capture.env(), "FASTVOICE_FAULTS": "hang-synthesis=FREEZE"}
    journal = tmp_path / "jobs"
    first = Daemon(broker, tmp_path, env, queue={"journal_dir": str(journal)})
    try:
        hung = say(first, text="FREEZE here.")
        first.recorder.event(hung, "started")
        waiting = [
            say(first, text=f"Announcement {n}.", priority=p) for n, p in ((1, "low"), (2, "high"))
        ]
        for job in waiting:
            first.recorder.event(job, "queued")
        first.process.kill()  # as systemd does when the watchdog expires
        first.process.wait(10)
    finally:
        first.stop()
    assert len(list(journal.glob("*.job.json"))) == 3
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    second = Daemon(
        broker, second_dir, capture.env(), base=first.base, queue={"journal_dir": str(journal)}
    )
    try:
        for job in (hung, *waiting):
            second.recorder.event(job, "finished")
        recovered = [
            json.loads(payload)
            for topic, payload, _ in second.recorder.seen
            if topic.endswith("/events") and json.loads(payload)["event"] == "queued"
        ]
        assert [event["id"] for event in recovered] == [hung, *waiting]  # as accepted
        assert all(event["recovered"] for event in recovered)
        assert list(journal.glob("*.job.json")) == []
    finally:
        second.stop()


@pytest.fixture
def small_disks(tmp_path):
    """Mounts tmpfs file systems: mount(name, size, read_only) -> the mount point."""
    mounted = []

    def mount(name: str, size: str, read_only: bool = False) -> Path:
        point = tmp_path / name
        point.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(directory: Path) -> None:
    handle = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):
        while True:
            os.write(handle, b"\0" * 4096)
    os.close(handle)


def test_full_and_read_only_disks_degrade_and_say_so(broker, capture, tmp_path, small_disks):
    cache, artifacts = small_disks("cache", "256k"), small_disks("artifacts", "256k")
    fill(cache)
    fill(artifacts)
    journal = small_disks("jobs", "64k", read_only=True)
    daemon = Daemon(
        broker,
        tmp_path,
        capture.env(),
        cache={"enabled": True, "dir": str(cache)},
        runtime={"artifact_dir": str(artifacts)},
        queue={"journal_dir": str(journal)},
    )
    try:
        job = say(daemon, text="The disks are full, and I still speak.")
        daemon.recorder.event(job, "finished")
        assert capture.played().size > 0

        def reports_every_problem(topic: str, payload: bytes) -> bool:
            if topic != f"{daemon.base}/status/info":
                return False
            info = json.loads(payload)
            return bool(info["cache"]["problem"] and info["journal"]["problem"])

        info = json.loads(daemon.recorder.wait_for(reports_every_problem)[1])
        assert "No space left on device" in info["cache"]["problem"]
        assert "Read-only file system" in info["journal"]["problem"]
        assert "No space left on device" in info["artifacts_problem"]
        # Nothing half-written was left behind on the full disks.
        assert sorted(p.name for p in cache.iterdir()) == ["filler"]
        assert sorted(p.name for p in artifacts.iterdir()) == ["filler"]
    finally:
        daemon.stop()
