"""Faults injected into a running service: a hung synthesis, broken disks, a lost broker, a lost
audio device. The service must say what happened, keep serving what it can, and lose nothing it
accepted."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import Broker
from tools.sound_server import SoundServer


def test_a_hung_synthesis_withholds_the_watchdog_so_systemd_restarts(broker, capture, tmp_path):
    env = {**capture.env(), "FASTVOICE_FAULTS": "hang-synthesis=FREEZE"}
    daemon = Daemon(broker, tmp_path, env, queue={"stall_limit_s": 2})
    try:
        daemon.notifications(until="WATCHDOG=1")  # healthy: pinged
        job = say(daemon, text="FREEZE here.")
        daemon.recorder.event(job, "started")
        stalled = daemon.notifications(until="STATUS=player-lane stalled")
        expected = "STATUS=player-lane stalled (no progress for 2 s); watchdog pings withheld"
        assert stalled[-1] == expected
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


def test_a_job_cut_off_by_a_stop_is_spoken_after_the_restart(broker, capture, tmp_path):
    journal = tmp_path / "jobs"
    first = Daemon(broker, tmp_path, capture.env(), queue={"journal_dir": str(journal)})
    try:
        cut = say(first, text=LONG_TEXT)
        first.recorder.event(cut, "started")
        first.process.terminate()  # systemctl stop / restart
        interrupted = first.recorder.event(cut, "interrupted")
        assert interrupted["reason"] == "shutdown" and interrupted["will_resume"] is True
        first.process.wait(30)
    finally:
        first.stop()
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    second = Daemon(
        broker, second_dir, capture.env(), base=first.base, queue={"journal_dir": str(journal)}
    )
    try:
        assert second.recorder.event(cut, "queued")["recovered"] is True
        second.recorder.event(cut, "finished", timeout=120)
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


LONG_TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(30))


@pytest.mark.parametrize("outage", ["restart", "frozen"])
def test_broker_outages_lose_no_accepted_job(capture, tmp_path, outage):
    """`restart`: the broker process is replaced (persistent sessions). `frozen`: it stops
    answering for longer than the keepalive (a half-open connection, as when the network drops),
    which only the keepalive can notice. Jobs accepted before play on, every one ends once."""
    broker_dir = tmp_path / "broker"
    broker_dir.mkdir()
    broker = Broker.start(broker_dir, persistent=True)
    daemon = Daemon(
        broker, tmp_path, capture.env(), mqtt={"client_id": f"fv-{outage}", "keepalive_s": 5}
    )
    try:
        long_job = say(daemon, text=LONG_TEXT)
        daemon.recorder.event(long_job, "started")
        waiting = [say(daemon, text=f"Queued before the outage {n}.") for n in range(2)]
        for job in waiting:
            daemon.recorder.event(job, "queued")
        mark = len(daemon.recorder.seen)
        if outage == "restart":
            broker = broker.restart()
        else:
            broker.process.send_signal(signal.SIGSTOP)
            try:
                assert daemon.log_says("disconnected from the broker", timeout=60)
            finally:
                broker.process.send_signal(signal.SIGCONT)
        online = f"{daemon.base}/status"
        daemon.recorder.wait_for(lambda t, p: t == online and p == b"online", since=mark)
        after = say(daemon, text="Sent after the outage.")
        for job in [long_job, *waiting, after]:
            daemon.recorder.event(job, "finished", timeout=120)
        for job in [long_job, *waiting, after]:
            kinds = daemon.recorder.events(job)
            assert kinds.count("started") == 1 and kinds.count("finished") == 1, (job, kinds)
    finally:
        daemon.stop()
        broker.stop()


@pytest.fixture
def sound_server(tmp_path):
    if shutil.which("pulseaudio") is None:
        pytest.fail("pulseaudio is missing: run tools/setup-dev.sh")
    server = SoundServer(tmp_path / "pulse")
    server.start()
    yield server
    server.kill()


def test_audio_device_lost_mid_job_fails_it_by_name_and_later_jobs_play(
    broker, sound_server, tmp_path
):
    daemon = Daemon(
        broker, tmp_path, sound_server.env(), audio={"device": "speaker_pa", "prefill_s": 0.1}
    )
    try:
        cut = say(daemon, text=LONG_TEXT)
        daemon.recorder.event(cut, "started")
        sound_server.wait_for(sound_server.playing)  # its stream is open and playing
        sound_server.kill()
        failed = daemon.recorder.event(cut, "failed")
        assert failed["reason"] == "audio_device"
        assert "'speaker_pa' stopped in the middle of playback" in failed["message"]
        while_gone = say(daemon, text="Nobody can hear this.")
        failed = daemon.recorder.event(while_gone, "failed")
        assert failed["reason"] == "audio_device" and "speaker_pa" in failed["message"]
        sound_server.start()  # plugged in again
        back = say(daemon, text="The speaker is back.")
        daemon.recorder.event(back, "finished")
        assert daemon.process.poll() is None
    finally:
        daemon.stop()
