"""`fastvoice say` on a box whose service runs: the job goes through the service's local socket
into its queue (order, priority, the service's device), `-o` brings the WAV back, and a service
that is down or gone leaves `say` speaking on its own. Also what `say` imports on each path."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import uuid
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EMBEDDED_RATE, REPO, run_cli
from tests.daemon_helpers import Daemon


@pytest.fixture
def served(broker, capture, tmp_path):
    """A service listening on a local socket of the test's own, and the env that finds it."""
    env = {**capture.env(), "FASTVOICE_SOCKET": str(tmp_path / "run" / "fastvoice.sock")}
    running = Daemon(broker, tmp_path, env, mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"})
    yield running, env
    running.stop()


def printed_events(stdout: bytes) -> list[tuple[str, str]]:
    """(event, id) of each line `say` printed."""
    return [tuple(line.split()[:2]) for line in stdout.decode().splitlines()]


def test_say_hands_its_job_to_the_service_which_plays_it(served, capture):
    daemon, env = served
    result = run_cli("say", "The laundry is done.", "--id", "local-1", env=env)
    assert result.returncode == 0, result.stderr
    assert printed_events(result.stdout) == [
        ("queued", "local-1"),
        ("started", "local-1"),
        ("finished", "local-1"),
    ]
    finished = daemon.recorder.event("local-1", "finished")  # the service's own events, on MQTT
    played = capture.played("default")
    assert abs(len(np.trim_zeros(played)) / EMBEDDED_RATE - finished["audio_s"]) < 0.3


def test_say_to_a_file_through_the_service_gets_the_wav_back(served, capture, tmp_path):
    daemon, env = served
    out = tmp_path / "back.wav"
    result = run_cli("say", "Written by the service.", "-o", str(out), "--id", "file-1", env=env)
    assert result.returncode == 0, result.stderr
    assert ("finished", "file-1") in printed_events(result.stdout)
    with wave.open(io.BytesIO(out.read_bytes())) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (EMBEDDED_RATE, 1, 2)
        seconds = wav.getnframes() / wav.getframerate()
    finished = daemon.recorder.event("file-1", "finished")
    assert abs(seconds - finished["audio_s"]) < 0.3
    assert capture.played("default").size == 0  # a file job never touches the speaker


def test_jobs_from_say_keep_the_queue_order_and_priority(served):
    daemon, env = served
    daemon.recorder.publish("pause", "true")
    daemon.recorder.wait_for(lambda t, p: t == f"{daemon.base}/pause/state" and p == b"true")
    command = [str(Path(sys.executable).parent / "fastvoice"), "say"]
    clients = {}
    for job, priority in (("low-1", "low"), ("normal-1", "normal"), ("high-1", "high")):
        clients[job] = subprocess.Popen(
            [*command, f"Job {job}.", "--id", job, "--priority", priority],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        daemon.recorder.event(job, "queued")  # in the paused queue before the next arrives
    daemon.recorder.publish("pause", "false")
    for job, client in clients.items():
        stdout, stderr = client.communicate(timeout=120)
        assert client.returncode == 0, stderr
        assert printed_events(stdout)[-1] == ("finished", job)
        daemon.recorder.event(job, "finished")  # the recorder has heard the job through
    started = [
        json.loads(payload)["id"]
        for topic, payload, _ in daemon.recorder.seen
        if topic == f"{daemon.base}/events" and json.loads(payload)["event"] == "started"
    ]
    assert started == ["high-1", "normal-1", "low-1"]


def test_a_service_that_is_down_leaves_say_speaking_on_its_own_with_a_note(tmp_path):
    stale = tmp_path / "fastvoice.sock"  # a socket file nobody listens on: a crashed service
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(stale))
    listener.close()
    out = tmp_path / "here.wav"
    result = run_cli("say", "Spoken here.", "-o", str(out), env=_env(FASTVOICE_SOCKET=str(stale)))
    assert result.returncode == 0, result.stderr
    # (A box whose voice was never built also hears that it is optimised now: not about this.)
    (note,) = [line for line in result.stderr.decode().splitlines() if "note:" in line]
    assert note.startswith("fastvoice: note:") and "speaking here" in note
    assert str(stale) in note
    with wave.open(str(out)) as wav:
        assert wav.getnframes() > 0


def test_no_service_on_the_box_is_no_note(tmp_path):
    out = tmp_path / "here.wav"
    missing = tmp_path / "none" / "fastvoice.sock"
    result = run_cli("say", "Spoken here.", "-o", str(out), env=_env(FASTVOICE_SOCKET=str(missing)))
    assert result.returncode == 0, result.stderr
    assert b"note:" not in result.stderr and b"socket" not in result.stderr
    assert out.stat().st_size > 44


def test_local_only_options_and_local_keep_the_job_away_from_the_service(served, tmp_path):
    daemon, env = served
    raw = run_cli("say", "Raw samples.", "--raw", env=env)
    out = tmp_path / "local.wav"
    local = run_cli("say", "In this process.", "--local", "-o", str(out), env=env)
    # Over half a second of 16-bit audio.
    assert raw.returncode == 0 and len(raw.stdout) > EMBEDDED_RATE
    assert local.returncode == 0 and local.stdout == b"" and out.stat().st_size > 44
    events = [t for t, _, _ in daemon.recorder.seen if t == f"{daemon.base}/events"]
    assert events == []


def test_the_socket_is_for_the_service_user_and_group_only(served):
    daemon, env = served
    path = Path(env["FASTVOICE_SOCKET"])
    assert path.is_socket() and path.stat().st_mode & 0o777 == 0o660
    daemon.stop()
    assert not path.exists()


def test_the_service_refuses_a_malformed_request_with_a_reason(served):
    _, env = served
    for request, reason in (
        (b"not json\n", "not a JSON line"),
        (b'{"v": 1, "say": {"text": "hi"}, "colour": 1}\n', "unknown request fields"),
        (b'{"v": 1, "say": {"text": "hi", "pitch": 2}}\n', "pitch: unknown field"),
        (b'{"v": 1, "say": "hi"}\n', '"say" must be a JSON object'),
    ):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(env["FASTVOICE_SOCKET"])
            client.sendall(request)
            answer = json.loads(client.makefile("rb").readline())
        assert answer["event"] == "rejected" and reason in answer["message"], answer
    assert run_cli("say", "Still serving.", env=env).returncode == 0


# What each path of `fastvoice say` may not import: behaviour, not timing (a module loaded is
# work done at every start). Read from the real command's process as it exits.
NEVER_FOR_SAY = (
    "paho",
    "wyoming",
    "onnx",  # the graph tools of `fastvoice build`; onnxruntime is another package
    "tokenizers",
    "pynvml",
    "daemon.service.commands",
    "daemon.mqtt.broker",
    "daemon.app.lifecycle",
    "daemon.app.composition",
    "daemon.app.supervisor",
    "daemon.service.lanes",
    "daemon.adapters",
    "daemon.voices.cosyvoice2",
    "daemon.runtime.trt",
    "daemon.runtime.ort_gpu",
    "daemon.runtime.budget",
    "edge_build",
    # Plain text without figures needs no number words, CLDR data or XML parser.
    "num2words",
    "babel",
    "defusedxml",
    "xml.etree",
)
NEVER_FOR_HANDOFF = ("numpy", "onnxruntime", "pydantic", "daemon.config", "piper", "yaml")


def imported(*args: str, env: dict[str, str]) -> set[str]:
    """The modules `fastvoice ARGS` had loaded when it exited."""
    report = (
        "import json, sys\n"
        f"sys.argv = ['fastvoice', *{list(args)!r}]\n"
        "from daemon.cli import main\n"
        "code = main()\n"
        "print('MODULES', json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", report], capture_output=True, env=env, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stderr.decode().rsplit("MODULES ", 1)[1]
    return set(json.loads(line))


def _forbidden(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules for p in prefixes if m == p or m.startswith(p + "."))


def test_say_here_imports_nothing_it_does_not_use(tmp_path):
    env = _env(FASTVOICE_SOCKET=str(tmp_path / "none.sock"))
    modules = imported("say", "Just this.", "-o", str(tmp_path / "x.wav"), env=env)
    assert "onnxruntime" in modules and "daemon.voices.vits" in modules  # it did speak
    assert _forbidden(modules, NEVER_FOR_SAY) == []


def test_say_through_the_service_loads_no_model_and_no_config_models(served, tmp_path):
    _, env = served
    modules = imported("say", "Through the service.", "-o", str(tmp_path / "x.wav"), env=env)
    assert "daemon.local_socket" in modules
    assert _forbidden(modules, NEVER_FOR_SAY + NEVER_FOR_HANDOFF) == []


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}
