"""One voice that cannot load never takes the box down: it is not installed in the first place
(loaded and heard in staging), and one that rots on disk later is quarantined: named with its
error and its fix by every command and the service, which goes on with the others (and with
the embedded voice when the broken one is the default)."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.config import DEFAULT_VOICE
from tests.conftest import run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.voice_catalog import junk_mirror

pytestmark = pytest.mark.slow  # starts services over broken voices

GERMAN = "de_DE-thorsten-medium"
JUNK = "de_DE-junk-medium"
REMOVE_FIX = f"fastvoice voices remove {GERMAN}"


def cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, "--config", str(config), timeout=300)


def rotten_box(directory: Path, mirror: Path, **settings) -> Path:
    """A box with the German voice installed, then its model damaged on disk."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "fastvoice.yaml"
    voices = directory / "voices"
    config.write_text(json.dumps({"catalog": {"dir": str(voices)}}))
    assert (
        cli(config, "voices", "install", "--from", str(mirror), GERMAN, "--no-build").returncode
        == 0
    )
    model = voices / "de/de_DE/thorsten/medium" / f"{GERMAN}.onnx"
    model.write_bytes(b"\x08\x07rotten" * 1000)
    config.write_text(json.dumps({"catalog": {"dir": str(voices)}, **settings}))
    return config


def test_a_voice_that_does_not_load_is_refused_and_leaves_nothing(tmp_path):
    mirror = junk_mirror(tmp_path / "mirror")
    config = tmp_path / "fastvoice.yaml"
    config.write_text(json.dumps({"catalog": {"dir": str(tmp_path / "voices")}}))
    result = cli(config, "voices", "install", "--from", str(mirror), JUNK, "--no-build")
    assert result.returncode == 1, result.stderr
    assert f"voice '{JUNK}' does not load".encode() in result.stderr
    assert b"not installed, its files were removed" in result.stderr
    assert b"installed " not in result.stdout
    assert [path for path in (tmp_path / "voices").rglob("*")] == []
    listed = json.loads(cli(config, "voices", "list", "--installed", "--json").stdout)
    assert [row["name"] for row in listed] == [DEFAULT_VOICE]


def test_every_command_names_a_rotten_voice_and_works_with_the_others(tmp_path, mirror):
    # Artifacts of its own: the build below makes the embedded voice's, whatever ran before.
    config = rotten_box(tmp_path, mirror, runtime={"artifact_dir": str(tmp_path / "artifacts")})

    box = cli(config, "voices", "--json")
    assert box.returncode == 0, box.stderr
    report = json.loads(box.stdout)
    assert [voice["name"] for voice in report["voices"]] == [DEFAULT_VOICE]
    [broken] = report["broken"]
    assert broken["name"] == GERMAN and REMOVE_FIX in broken["fix"]

    rows = {
        row["name"]: row
        for row in json.loads(cli(config, "voices", "list", "--installed", "--json").stdout)
    }
    assert rows[GERMAN]["broken"]["fix"] == broken["fix"]
    assert rows[DEFAULT_VOICE]["installed"] and rows[DEFAULT_VOICE]["broken"] is None
    shown = json.loads(cli(config, "voices", "show", DEFAULT_VOICE, "--json").stdout)
    assert shown["installed"] is True and shown["source"] == "config"

    out = tmp_path / "hello.wav"
    assert (
        cli(config, "say", "Hello.", "-o", str(out)).returncode == 0 and out.stat().st_size > 1000
    )
    refused = cli(config, "say", "--voice", GERMAN, "Hallo.", "-o", str(tmp_path / "de.wav"))
    assert refused.returncode != 0
    assert f"voice '{GERMAN}' cannot be used".encode() in refused.stderr
    assert REMOVE_FIX.encode() in refused.stderr

    doctor = cli(config, "doctor", "--json")
    findings = {finding["check"]: finding for finding in json.loads(doctor.stdout)}
    assert findings[f"voice {GERMAN}"]["status"] == "fail"
    assert REMOVE_FIX in findings[f"voice {GERMAN}"]["fix"]
    assert findings[f"voice {DEFAULT_VOICE}"]["status"] == "ok"

    built = cli(config, "build")
    assert built.returncode == 1
    assert f"cannot build {GERMAN} (the others are built)".encode() in built.stderr
    assert f"{DEFAULT_VOICE}/vits/decoder: built".encode() in built.stdout


@pytest.fixture
def rotten_default(broker, alsa, mirror, tmp_path):
    """A service whose configured default voice is the rotten one."""
    http_port = free_port()
    config = rotten_box(tmp_path / "box", mirror)
    running = Daemon(
        broker,
        tmp_path,
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        voice=GERMAN,
        catalog=json.loads(config.read_text())["catalog"],
        http={"listen": f"127.0.0.1:{http_port}"},
    )
    running.url = f"http://127.0.0.1:{http_port}"
    yield running
    running.stop()


def test_the_service_quarantines_a_rotten_default_and_speaks_with_the_embedded_voice(
    rotten_default, mirror
):
    box = rotten_default
    recorder = box.recorder
    event = recorder.event(None, "voice_broken")
    assert event["voice"] == GERMAN and event["fallback"] == DEFAULT_VOICE
    assert REMOVE_FIX in event["fix"]
    assert box.log_says(f"the default voice '{GERMAN}' cannot be used; speaking with the embedded")

    info = json.loads(recorder.wait_for(lambda t, p: t == f"{box.base}/status/info")[1])
    assert info["default_voice"] == DEFAULT_VOICE
    assert info["default_voice_fallback_from"] == GERMAN
    assert [voice["name"] for voice in info["broken_voices"]] == [GERMAN]

    spoken = say(box, text="The box still speaks.")
    assert recorder.event(spoken, "finished")["id"] == spoken
    refused = say(box, text="Hallo.", voice=GERMAN)
    rejected = recorder.event(refused, "rejected")
    assert f"voice '{GERMAN}' cannot be used" in rejected["message"]

    metrics = httpx.get(f"{box.url}/metrics", timeout=30).text
    broken = {
        sample.labels["voice"]: sample.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "fastvoice_voice_broken"
        for sample in family.samples
    }
    assert broken == {GERMAN: 1}

    # The fix the service named, then a reload: the configured default is back.
    fixed = cli(box.config_path, "voices", "install", "--from", str(mirror), GERMAN, "--no-build")
    assert fixed.returncode == 0, fixed.stderr
    since = len(recorder.seen)
    box.process.send_signal(signal.SIGHUP)
    info = json.loads(
        recorder.wait_for(
            lambda t, p: t == f"{box.base}/status/info" and not json.loads(p)["broken_voices"],
            since=since,
        )[1]
    )
    assert info["default_voice"] == GERMAN and info["default_voice_fallback_from"] is None
    german = say(box, text="Wieder da.")
    assert recorder.event(german, "finished")["id"] == german
