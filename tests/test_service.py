"""`fastvoice serve` against a real mosquitto, playing on the ALSA capture device."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import uuid
import wave
from pathlib import Path

import numpy as np
import pytest

from daemon.audio.pcm_stream import decode_chunk
from daemon.config import parse_config
from daemon.errors import FastvoiceError
from edge_build.build import missing_artifacts
from edge_build.cpu_classes import this_cpu, vits_candidates
from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import Recorder

TEXTS_FOR_LANES = [
    "The next train to the airport leaves from platform four.",
    "Please keep your belongings with you at all times.",
    "Food and drinks are available in the middle car.",
]
LONG_TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(40))


@pytest.fixture
def daemon(broker, capture, tmp_path):
    running = Daemon(
        broker, tmp_path, capture.env(), mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"}
    )
    yield running
    running.stop()


def test_plain_text_plays_and_events_arrive_in_order(daemon, capture):
    daemon.recorder.publish("say", "The washing machine has finished.")
    queued = daemon.recorder.event(None, "queued")
    finished = daemon.recorder.event(queued["id"], "finished")
    assert daemon.recorder.events(queued["id"]) == ["queued", "started", "finished"]
    for key in ("queue_wait_s", "first_audio_s", "synthesis_s", "audio_s", "rtf"):
        assert finished[key] >= 0
    played = capture.played("default")
    assert abs(len(np.trim_zeros(played)) / EMBEDDED_RATE - finished["audio_s"]) < 0.3


def test_a_lead_in_keeps_the_first_word_from_an_output_that_wakes_late(broker, capture, tmp_path):
    """An amplifier that wakes late swallows the start of what the stream carries: with
    `audio.lead_in_ms` the first 400 ms of the stream are silence, so a device that drops them
    (simulated: the captured stream cut there) keeps every word; `audio.tail_ms` pads the end."""
    mqtt = {"client_id": f"fv-{uuid.uuid4().hex[:6]}"}
    padded = Daemon(
        broker,
        tmp_path,
        capture.env(),
        mqtt=mqtt,
        audio={"prefill_s": 300, "lead_in_ms": 500, "tail_ms": 300},
    )
    try:
        job = say(padded, text="The washing machine has finished.")
        finished = padded.recorder.event(job, "finished")
    finally:
        padded.stop()
    stream = np.fromfile(capture.files["default"], dtype=np.float32)
    woken = stream[int(0.4 * EMBEDDED_RATE) :]  # what a device that drops 400 ms plays
    assert np.count_nonzero(stream) == np.count_nonzero(woken)
    heard = np.trim_zeros(woken)
    assert abs(len(heard) / EMBEDDED_RATE - finished["audio_s"]) < 0.3
    first, last = np.flatnonzero(stream)[[0, -1]]
    assert first >= 0.5 * EMBEDDED_RATE and len(stream) - last >= 0.3 * EMBEDDED_RATE


# What the text or voice asks that cannot be spoken: tests/test_conformance.py, on every
# interface (here, a voice name that would be a path).
BAD_PAYLOADS = [
    (b'{"text": "hi"', "invalid JSON"),
    (b'{"text": "hi', "invalid JSON: Unterminated string starting at line 1 column 10"),
    (b'{"text": "hi", "priority": 5}', "priority: 5 is not one of"),
    (b'{"text": "hi", "colour": "red"}', "colour: unknown field"),
    (b'{"text": ""}', "text is empty"),
    (bytes(range(128, 256)), "not UTF-8"),
    (b"x" * 10_000_000, "above the maximum 65536"),
    (b'{"text": "hi", "output": "publish"}', "needs a reply_topic"),
    (b'{"text": "hi", "output": "publish", "reply_topic": "a/#"}', "not a plain topic"),
    (b'{"text": "hi", "output": "publish", "reply_topic": "other/box/audio"}', "is outside"),
    (b'{"text": "hi", "voice": "../../../etc/passwd"}', "unknown voice '../../../etc/passwd'"),
]


def test_bad_payloads_are_rejected_by_name_and_service_goes_on(daemon):
    for payload, _ in BAD_PAYLOADS:
        daemon.recorder.publish("say", payload)
        job = say(daemon, text="Still here.")
        daemon.recorder.event(job, "finished")
    rejected = [
        json.loads(p)
        for t, p, _ in daemon.recorder.seen
        if t.endswith("/events") and json.loads(p)["event"] == "rejected"
    ]
    assert len(rejected) == len(BAD_PAYLOADS)
    for event, (_, message) in zip(rejected, BAD_PAYLOADS, strict=True):
        reason = "invalid"  # not a `say` at all
        if "unknown voice" in message:
            reason = "bad_voice"
        elif "text is empty" in message:
            reason = "bad_text"  # a `say`, with nothing to say: as on every interface
        assert event["reason"] == reason and message in event["message"], event


def test_a_bad_volume_is_named_once(daemon):
    daemon.recorder.publish("volume", "1.7")
    rejected = daemon.recorder.event(None, "rejected")
    assert rejected["message"] == "volume: 1.7 is not a number from 0 to 1"


def test_unknown_speaker_is_refused_when_sent_with_a_reason(daemon):
    job = say(daemon, text="Hello.", speaker="alice")
    rejected = daemon.recorder.event(job, "rejected")
    assert rejected["reason"] == "bad_voice" and "single speaker" in rejected["message"]
    assert "queued" not in daemon.recorder.events(job)


def test_duplicate_id_never_plays_twice(daemon):
    job = say(daemon, text="Once only.")
    say(daemon, text="Once only.", id=job)
    rejected = daemon.recorder.event(job, "rejected")
    assert rejected["reason"] == "duplicate"
    daemon.recorder.event(job, "finished")
    assert daemon.recorder.events(job).count("started") == 1


def test_publish_wav_returns_the_audio(daemon):
    topic = f"{daemon.base}/reply/wav"
    job = say(daemon, text="Sent back as a file.", output="publish", reply_topic=topic)
    finished = daemon.recorder.event(job, "finished")
    _, payload, _ = daemon.recorder.wait_for(lambda t, p: t == topic)
    with wave.open(io.BytesIO(payload)) as wav:
        assert wav.getframerate() == EMBEDDED_RATE and wav.getsampwidth() == 2
        assert abs(wav.getnframes() / EMBEDDED_RATE - finished["audio_s"]) < 0.3


def test_a_say_sets_its_own_rate_and_pause_between_sentences(daemon):
    """Pacing per request (Home Assistant's Piper add-on's two most asked-for options): twice
    the rate is about half as long; a longer pause between sentences adds exactly that."""

    def published_seconds(**pacing) -> float:
        topic = f"{daemon.base}/reply/pacing-{len(pacing)}-{pacing.get('rate', 1)}"
        text = "The train is late. Please wait."
        job = say(daemon, text=text, output="publish", reply_topic=topic, **pacing)
        daemon.recorder.event(job, "finished")
        _, payload, _ = daemon.recorder.wait_for(lambda t, p: t == topic)
        with wave.open(io.BytesIO(payload)) as wav:
            return wav.getnframes() / wav.getframerate()

    plain = published_seconds()
    fast = published_seconds(rate=2.0)
    paused = published_seconds(sentence_pause_s=2.0, rate=1.0)
    default_pause = parse_config({}).audio.sentence_pause_s
    # The speech, not the pause, takes the rate; each phoneme's frames are rounded up, so the
    # short ones do not halve (0.58 to 0.66 of the length measured over eight syntheses).
    assert 0.45 < (fast - default_pause) / (plain - default_pause) < 0.75
    # (Each synthesis draws its own durations: the sentences themselves vary by tens of ms.)
    assert paused - plain == pytest.approx(2.0 - default_pause, abs=0.25)


@pytest.mark.parametrize(("form", "sample_rate"), [("flac", 16000), ("opus", 48000), ("mp3", None)])
def test_published_audio_comes_in_the_format_and_rate_asked_for(daemon, form, sample_rate):
    """ESP32 satellites want 16 kHz, streams Opus or MP3: each job says so itself."""
    import soundfile

    topic = f"{daemon.base}/reply/{form}"
    job = say(
        daemon,
        text="In the format asked for.",
        output="publish",
        reply_topic=topic,
        format=form,
        **({"sample_rate": sample_rate} if sample_rate else {}),
    )
    finished = daemon.recorder.event(job, "finished")
    _, payload, _ = daemon.recorder.wait_for(lambda t, p: t == topic)
    audio, rate = soundfile.read(io.BytesIO(payload))
    assert rate == (sample_rate or EMBEDDED_RATE)
    assert abs(len(audio) / rate - finished["audio_s"]) < 0.15


def test_the_configs_publish_format_and_rate_serve_a_say_that_names_none(broker, capture, tmp_path):
    import soundfile

    mqtt = {
        "client_id": f"fv-{uuid.uuid4().hex[:6]}",
        "publish_format": "flac",
        "publish_sample_rate": 16000,
    }
    box = Daemon(broker, tmp_path, capture.env(), mqtt=mqtt)
    try:
        topic = f"{box.base}/reply/default-format"
        job = say(box, text="As the box prefers.", output="publish", reply_topic=topic)
        box.recorder.event(job, "finished")
        _, payload, _ = box.recorder.wait_for(lambda t, p: t == topic)
    finally:
        box.stop()
    assert payload[:4] == b"fLaC"
    assert soundfile.info(io.BytesIO(payload)).samplerate == 16000


def test_pcm_chunks_come_at_the_rate_asked_for(daemon):
    topic = f"{daemon.base}/reply/pcm16k"
    job = say(
        daemon,
        text="Sixteen kilohertz for a satellite.",
        output="publish",
        reply_topic=topic,
        format="pcm",
        sample_rate=16000,
    )
    finished = daemon.recorder.event(job, "finished")
    daemon.recorder.wait_for(lambda t, p: t == topic and decode_chunk(p).is_last)
    chunks = [decode_chunk(p) for t, p, _ in daemon.recorder.seen if t == topic]
    assert {c.sample_rate for c in chunks} == {16000}
    seconds = sum(c.samples.size for c in chunks) / 16000
    assert abs(seconds - finished["audio_s"]) < 0.05


def test_publish_pcm_chunks_in_order_with_a_final_empty_one(daemon):
    topic = f"{daemon.base}/reply/pcm"
    job = say(
        daemon, text="First part. Second part.", output="publish", reply_topic=topic, format="pcm"
    )
    daemon.recorder.event(job, "finished")
    daemon.recorder.wait_for(lambda t, p: t == topic and decode_chunk(p).is_last)
    chunks = [decode_chunk(p) for t, p, _ in daemon.recorder.seen if t == topic]
    assert [c.sequence for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].is_last and all(c.samples.size for c in chunks[:-1])
    assert {c.sample_rate for c in chunks} == {EMBEDDED_RATE}


def started_order(daemon: Daemon) -> list[str]:
    return [
        json.loads(p)["id"]
        for t, p, _ in daemon.recorder.seen
        if t.endswith("/events") and json.loads(p)["event"] == "started"
    ]


def test_priority_then_arrival_order(daemon):
    daemon.recorder.publish("pause", "true")
    daemon.recorder.wait_for(lambda t, p: t.endswith("/pause/state") and p == b"true")
    low = say(daemon, text="Low.", priority="low")
    normal = say(daemon, text="Normal.")
    high = say(daemon, text="High.", priority="high")
    second_normal = say(daemon, text="Normal again.")
    daemon.recorder.event(second_normal, "queued")
    daemon.recorder.publish("pause", "false")
    for job in (low, normal, high, second_normal):
        daemon.recorder.event(job, "finished")
    assert started_order(daemon) == [high, normal, second_normal, low]


def test_publish_only_jobs_run_side_by_side_with_parallel_workers(broker, capture, tmp_path):
    two = Daemon(broker, tmp_path, capture.env(), runtime={"workers": 2})
    try:
        two.recorder.publish("pause", "true")
        two.recorder.wait_for(lambda t, p: t.endswith("/pause/state") and p == b"true")
        text = " ".join(TEXTS_FOR_LANES)
        jobs = [
            say(two, text=text, output="publish", reply_topic=f"{two.base}/reply/{n}", format="pcm")
            for n in range(2)
        ]
        two.recorder.event(jobs[1], "queued")
        two.recorder.publish("pause", "false")
        for job in jobs:
            two.recorder.event(job, "finished")
        events = [
            (json.loads(p)["id"], json.loads(p)["event"])
            for t, p, _ in two.recorder.seen
            if t.endswith("/events")
        ]
        first_finish = min(events.index((job, "finished")) for job in jobs)
        assert all(events.index((job, "started")) < first_finish for job in jobs), events
    finally:
        two.stop()


def test_queue_full_and_expired_jobs_are_rejected(broker, capture, tmp_path):
    small = Daemon(broker, tmp_path, capture.env(), queue={"max_jobs": 2})
    try:
        small.recorder.publish("pause", "true")
        small.recorder.wait_for(lambda t, p: t.endswith("/pause/state") and p == b"true")
        expiring = say(small, text="Too late.", expires_s=0.001)
        # Gone from the paused queue at its expiry: it takes no room there.
        assert small.recorder.event(expiring, "rejected")["reason"] == "expired"
        kept = [say(small, text="Kept."), say(small, text="Kept too.")]
        overflow = say(small, text="One too many.")
        assert small.recorder.event(overflow, "rejected")["reason"] == "queue_full"
        small.recorder.publish("pause", "false")
        for job in kept:
            small.recorder.event(job, "finished")
        assert "started" not in small.recorder.events(expiring)
    finally:
        small.stop()


def test_interrupted_job_resumes_when_configured(broker, capture, tmp_path):
    resuming = Daemon(broker, tmp_path, capture.env(), queue={"resume_interrupted": True})
    try:
        long_job = say(resuming, text=LONG_TEXT)
        resuming.recorder.event(long_job, "started")
        critical = say(resuming, text="Attention please.", priority="critical")
        resuming.recorder.event(long_job, "interrupted")
        resuming.recorder.event(critical, "finished")
        resuming.recorder.event(long_job, "finished", timeout=120)
        assert resuming.recorder.events(long_job) == [
            "queued",
            "started",
            "interrupted",
            "started",
            "finished",
        ]
    finally:
        resuming.stop()


def test_stop_ends_only_the_current_job(daemon):
    long_job = say(daemon, text=LONG_TEXT)
    daemon.recorder.event(long_job, "started")
    next_job = say(daemon, text="Next in line.")
    daemon.recorder.event(next_job, "queued")
    daemon.recorder.publish("stop", "")
    assert daemon.recorder.event(long_job, "interrupted")["reason"] == "stopped"
    daemon.recorder.event(next_job, "finished")


def test_stop_by_id_takes_one_queued_job_and_leaves_the_rest(daemon):
    long_job = say(daemon, text=LONG_TEXT)
    daemon.recorder.event(long_job, "started")
    doomed, kept = say(daemon, text="Never said."), say(daemon, text="Said after all.")
    daemon.recorder.event(kept, "queued")
    daemon.recorder.publish("stop", json.dumps({"id": doomed}))
    assert daemon.recorder.event(doomed, "interrupted")["reason"] == "stopped"
    daemon.recorder.publish("stop", json.dumps({"id": long_job}))
    assert daemon.recorder.event(long_job, "interrupted")["reason"] == "stopped"
    daemon.recorder.event(kept, "finished")
    assert "started" not in daemon.recorder.events(doomed)
    daemon.recorder.publish("stop", json.dumps({"id": "nobody"}))
    daemon.recorder.wait_for(lambda t, p: t.endswith("/events") and b"no job 'nobody'" in p)


def test_critical_interrupts_what_is_playing(daemon):
    long_job = say(daemon, text=LONG_TEXT)
    daemon.recorder.event(long_job, "started")
    critical = say(daemon, text="Fire alarm. Please leave the building.", priority="critical")
    interrupted = daemon.recorder.event(long_job, "interrupted")
    assert interrupted["reason"] == "critical"
    daemon.recorder.event(critical, "finished")
    assert "finished" not in daemon.recorder.events(long_job)


def test_stop_all_ends_the_current_job_and_clears_the_queue(daemon):
    long_job = say(daemon, text=LONG_TEXT)
    daemon.recorder.event(long_job, "started")
    waiting = [say(daemon, text=f"Waiting {n}.") for n in range(3)]
    daemon.recorder.publish("stop", json.dumps({"all": True}))
    assert daemon.recorder.event(long_job, "interrupted")["reason"] == "stopped"
    for job in waiting:
        assert daemon.recorder.event(job, "interrupted")["reason"] == "stopped"
    after = say(daemon, text="Back to normal.")
    daemon.recorder.event(after, "finished")
    assert all("started" not in daemon.recorder.events(job) for job in waiting)


def test_volume_changes_amplitude_and_is_retained(daemon, capture):
    def peak_of(text: str) -> float:
        capture.reset()
        job = say(daemon, text=text, id=uuid.uuid4().hex[:8])
        daemon.recorder.event(job, "finished")
        return float(np.abs(capture.played("default")).max())

    loud = peak_of("Volume check.")
    daemon.recorder.publish("volume", "0.25")
    daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/volume/state" and p == b"0.25")
    quiet = peak_of("Volume check.")
    assert quiet == pytest.approx(loud * 0.25, rel=0.05)
    daemon.recorder.publish("volume", "7")
    assert "not a number from 0 to 1" in daemon.recorder.event(None, "rejected")["message"]


def test_status_info_and_stats(daemon):
    daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/status/info")
    late = Recorder(daemon.port, daemon.base)  # subscribes now: sees only what was retained
    try:
        _, info, retained = late.wait_for(lambda t, p: t == f"{daemon.base}/status/info")
    finally:
        late.close()
    info = json.loads(info)
    assert retained and info["voices"][0]["name"] == "en_US-joe-medium"
    assert info["backend"] == "ort-cpu"
    assert info["backend_reason"].startswith("auto: ort-cpu") and info["gpu"] is None
    _, stats, _ = daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/stats")
    stats = json.loads(stats)
    assert stats["rss_bytes"] > 0 and "queue_depth" in stats
    assert stats["gpu_memory"] is None  # no GPU backend in use


def test_systemd_ready_status_and_watchdog(daemon):
    messages = daemon.notifications(until="WATCHDOG=1")
    assert "READY=1" in messages
    assert any(m.startswith("STATUS=serving") for m in messages)


def test_sighup_with_a_broken_config_keeps_serving(daemon):
    daemon.notifications(until="READY=1")
    daemon.config_path.write_text("audio: {volume: 9}\n")
    daemon.process.send_signal(signal.SIGHUP)
    refused = daemon.notifications(until="STATUS=config reload refused")[-1]
    assert "STATUS=config reload refused" in refused
    job = say(daemon, text="Still serving.")
    daemon.recorder.event(job, "finished")


def test_sigterm_publishes_stopped_and_logs_no_lost_connection(daemon):
    daemon.process.terminate()
    assert daemon.process.wait(30) == 0
    daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/status" and p == b"stopped")
    log = (daemon.config_path.parent / "serve.log").read_text()
    assert "reconnecting" not in log and "disconnected" not in log, log[-500:]


def test_sigkill_leaves_offline_through_the_last_will(broker, daemon):
    daemon.process.kill()
    daemon.process.wait(10)
    daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/status" and p == b"offline", 90)


@pytest.mark.parametrize("drop_in", [None, "fastvoice-gpu.conf"])
def test_unit_file_verifies_without_warnings(tmp_path, drop_in):
    repo = Path(__file__).resolve().parent.parent
    unit = (repo / "systemd" / "fastvoice.service").read_text()
    if drop_in is not None:  # a drop-in's sections apply after the unit's own, as appended here
        unit += "\n" + (repo / "systemd" / drop_in).read_text()
    executable = Path(sys.executable).parent / "fastvoice"
    (tmp_path / "fastvoice.service").write_text(
        unit.replace("/opt/fastvoice/.venv/bin/fastvoice", str(executable))
    )
    result = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "fastvoice.service")],
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "info"},
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_unit_is_sandboxed_to_an_ok_exposure_without_root():
    unit_path = Path(__file__).resolve().parent.parent / "systemd" / "fastvoice.service"
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit_path)],
        capture_output=True,
        text=True,
    )
    score = re.search(
        r"Overall exposure level for fastvoice.service: ([0-9.]+) (\w+)", result.stdout
    )
    assert score is not None, result.stdout + result.stderr
    assert float(score.group(1)) <= 2.0 and score.group(2) == "OK", score.group(0)
    unit = dict(line.split("=", 1) for line in unit_path.read_text().splitlines() if "=" in line)
    assert unit["User"] == "fastvoice" and unit["Group"] == "fastvoice"
    assert unit["CapabilityBoundingSet"] == "" and unit["AmbientCapabilities"] == ""
    assert unit["NoNewPrivileges"] == "yes"
    # Audio and GPU stay reachable: no private /dev, and the groups that own the devices.
    assert "PrivateDevices" not in unit and unit["SupplementaryGroups"] == "audio video"


def send_config(daemon: Daemon, tmp_path: Path) -> Path:
    path = tmp_path / "client.yaml"
    path.write_text(json.dumps({"mqtt": {"port": daemon.port, "base_topic": daemon.base}}))
    return path


def test_send_follows_the_job_and_prints_timings(daemon, tmp_path):
    config = send_config(daemon, tmp_path)
    result = run_cli("send", "Hello from the operator.", "--id", "op-1", "--config", str(config))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["queued", "started", "finished"]
    assert "op-1" in lines[-1] and "first_audio_s=" in lines[-1] and "rtf=" in lines[-1]


def test_send_saves_the_published_wav(daemon, tmp_path):
    out = tmp_path / "back.wav"
    config = send_config(daemon, tmp_path)
    result = run_cli("send", "Sent back to me.", "-o", str(out), "--config", str(config))
    assert result.returncode == 0, result.stderr
    with wave.open(str(out)) as wav:
        assert wav.getframerate() == EMBEDDED_RATE and wav.getnframes() > EMBEDDED_RATE // 2


def test_send_reports_a_rejection_and_a_missing_service(daemon, tmp_path):
    config = send_config(daemon, tmp_path)
    result = run_cli("send", "x" * 20_000, "--config", str(config))
    assert result.returncode == 2 and b"rejected" in result.stdout  # as `say` exits for it
    nobody = tmp_path / "nobody.yaml"
    nobody.write_text(json.dumps({"mqtt": {"port": daemon.port, "base_topic": "fvtest/nobody"}}))
    result = run_cli("send", "Anyone?", "--timeout", "2", "--config", str(nobody))
    assert result.returncode == 1 and b"no answer from fvtest/nobody within 2 s" in result.stderr


def test_pregenerated_phrase_is_a_cache_hit(broker, capture, tmp_path):
    phrase = "Doors closing. Please stand clear."
    cache = {"dir": str(tmp_path / "phrases"), "pregenerate": [{"text": phrase}]}
    running = Daemon(broker, tmp_path, capture.env(), cache=cache)
    try:
        assert len(list((tmp_path / "phrases").glob("*.fvc"))) == 1, "rendered before READY"
        job = say(running, text=phrase)
        finished = running.recorder.event(job, "finished")
        assert finished["cache_hit"] is True
        fresh = say(running, text="A phrase nobody rendered yet.")
        assert running.recorder.event(fresh, "finished")["cache_hit"] is False
    finally:
        running.stop()


def test_first_start_builds_the_artifacts(broker, capture, tmp_path):
    store = tmp_path / "artifacts"
    running = Daemon(broker, tmp_path, capture.env(), runtime={"artifact_dir": str(store)})
    try:
        # The build child's progress reaches systemd through the service (NotifyAccess=main),
        # each message extending the start timeout.
        building = running.notifications(until="READY=1")
        assert "STATUS=building: en_US-joe-medium/vits: optimising the fp32 graphs" in "|".join(
            building
        )
        assert all("EXTEND_TIMEOUT_USEC=" in m for m in building if m.startswith("STATUS=build"))
        kinds = {json.loads(m.read_text())["kind"] for m in store.glob("*/manifest.json")}
        parts = {f"ort-optimized-onnx/{part}" for part in ("encoder", "decoder")}
        tried = [candidate.precision for candidate in vits_candidates(this_cpu())[0]]
        variants = {f"{kind}@{p}" for kind in parts for p in tried}
        assert kinds == parts | variants | {"ort-precision-choice"}
        _, info, _ = running.recorder.wait_for(lambda t, p: t.endswith("/status/info"))
        stages = json.loads(info)["voices"][0]["stages"]
        assert all(any(note.startswith("artifact ") for note in s["notes"]) for s in stages)
        job = say(running, text="Built on this box.")
        running.recorder.event(job, "finished")
    finally:
        running.stop()
    again_dir = tmp_path / "again"
    again_dir.mkdir()
    again = Daemon(broker, again_dir, capture.env(), runtime={"artifact_dir": str(store)})
    try:  # everything there and intact: no build process, straight to serving
        started = again.notifications(until="READY=1")
        assert not any(m.startswith("STATUS=building") for m in started), started
        assert "STATUS=checking artifacts for this box" in started
    finally:
        again.stop()


def test_a_damaged_artifact_is_rebuilt_before_the_service_loads_it(broker, capture, tmp_path):
    from tests.test_artifacts import damage_every_file

    store = tmp_path / "artifacts"
    runtime = {"artifact_dir": str(store), "precision": "fp32"}
    config = tmp_path / "build.yaml"
    config.write_text(json.dumps({"runtime": runtime}))
    assert run_cli("build", "--config", str(config)).returncode == 0
    damaged = damage_every_file(store)
    running = Daemon(broker, tmp_path, capture.env(), runtime=runtime)
    try:
        building = "|".join(running.notifications(until="READY=1"))
        assert "STATUS=building: en_US-joe-medium/vits: optimising the fp32 graphs" in building
        assert running.log_says("is damaged (its xxh3_128 differs)")
        _, info, _ = running.recorder.wait_for(lambda t, p: t.endswith("/status/info"))
        stages = json.loads(info)["voices"][0]["stages"]
        assert all(any(note.startswith("artifact ") for note in s["notes"]) for s in stages)
        assert all(path.exists() for path in damaged)  # replaced by intact ones, same names
        assert missing_artifacts(parse_config({"runtime": runtime}), store, gpu=False) == []
        job = say(running, text="Rebuilt on this box.")
        running.recorder.event(job, "finished")
    finally:
        running.stop()


def _die_without_answer(sender) -> None:
    sender.close()
    raise SystemExit(3)


def test_a_build_child_that_dies_without_an_answer_is_a_clear_error():
    import multiprocessing

    from daemon.service.artifact_build import follow_build

    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_die_without_answer, args=(sender,))
    child.start()
    sender.close()
    with pytest.raises(FastvoiceError, match=r"ended without an answer \(exit code 3\)"):
        follow_build(receiver, child)
