"""`fastvoice doctor` on real parts: a real broker (open, with passwords, with an ACL that
shuts the box out), the capture device, the embedded voice, broken configs; each problem is
named with its fix and fails the exit code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import run_cli
from tests.mqtt_helpers import Broker


def doctor(tmp_path: Path, env: dict[str, str], **config) -> tuple[int, dict[str, dict]]:
    path = tmp_path / "fastvoice.yaml"
    path.write_text(json.dumps(config))
    result = run_cli("doctor", "--json", "--config", str(path), env=env, timeout=300)
    findings = {finding["check"]: finding for finding in json.loads(result.stdout)}
    return result.returncode, findings


def test_a_healthy_box_passes_every_check(tmp_path, broker, capture):
    code, findings = doctor(tmp_path, capture.env(), mqtt={"port": broker.port})
    failed = {name: f for name, f in findings.items() if f["status"] == "fail"}
    assert code == 0 and not failed, failed
    assert findings["audio device"]["detail"].endswith("Hz")
    assert "may publish and subscribe" in findings["broker"]["detail"]
    assert findings["voice en_US-joe-medium"]["status"] == "ok"
    assert "; precision auto: " in findings["voice en_US-joe-medium"]["detail"]
    assert {"config", "memory", "GPU", "clock", "artifacts"} <= set(findings)
    clock = findings["clock"]
    if clock["detail"] == "not synchronised":  # quiet hours and schedules follow the clock
        assert clock["status"] == "warn" and "timedatectl set-ntp true" in clock["fix"]


def test_an_unknown_device_and_no_broker_fail_with_their_fixes(tmp_path, capture):
    code, findings = doctor(
        tmp_path, capture.env(), audio={"device": "no-such-card"}, mqtt={"port": 9}
    )
    assert code == 1
    assert findings["audio device"]["status"] == "fail"
    assert "speaker_a" in findings["audio device"]["detail"]  # the devices there are
    assert "fastvoice devices" in findings["audio device"]["fix"]
    assert findings["broker"]["status"] == "fail" and "cannot reach" in findings["broker"]["detail"]
    assert "mosquitto" in findings["broker"]["fix"]
    assert findings["voice en_US-joe-medium"]["status"] == "ok"  # the others still ran


def test_wrong_credentials_and_a_closed_acl_are_told_apart(tmp_path, capture):
    passwords = tmp_path / "passwords"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), "box", "right"], check=True)
    acl = tmp_path / "acl"
    acl.write_text("user box\ntopic readwrite elsewhere/#\n")
    broker = Broker.start(
        tmp_path, extra=f"allow_anonymous false\npassword_file {passwords}\nacl_file {acl}"
    )
    try:
        secret = tmp_path / "secret"
        for password, problem in (
            ("wrong", "refused the connection"),
            ("right", "never came back"),
        ):
            secret.write_text(password)
            secret.chmod(0o600)
            mqtt = {"port": broker.port, "username": "box", "password_file": str(secret)}
            code, findings = doctor(tmp_path, capture.env(), mqtt=mqtt)
            assert code == 1 and problem in findings["broker"]["detail"], findings["broker"]
        assert "mosquitto.acl" in findings["broker"]["fix"]
    finally:
        broker.stop()


def test_a_broken_config_is_named_and_the_rest_that_needs_none_still_runs(tmp_path, capture):
    code, findings = doctor(tmp_path, capture.env(), audio={"volume": 7})
    assert code == 1
    assert "audio.volume: 7 is above the maximum 1.0" in findings["config"]["detail"]
    assert findings["memory"]["status"] in ("ok", "warn")


def test_plain_output_says_each_fix(tmp_path, capture):
    (tmp_path / "c.yaml").write_text(json.dumps({"mqtt": {"port": 9}}))
    result = run_cli("doctor", "--config", str(tmp_path / "c.yaml"), env=capture.env())
    assert result.returncode == 1
    assert b"fail  broker: cannot reach localhost:9" in result.stdout
    assert b"      fix: is the broker running" in result.stdout


def test_a_box_without_a_sound_card_writes_files_and_doctor_checks_their_folder(tmp_path):
    """The documented headless setting (audio.device: none with audio.file_dir) is no failure:
    doctor says where the jobs go and that the folder takes files; a folder that cannot be
    made there is named."""
    jobs = tmp_path / "jobs"
    headless = {"device": "none", "file_dir": str(jobs)}
    _, findings = doctor(tmp_path, dict(os.environ), audio=headless, mqtt={"port": 9})
    device, files = findings["audio device"], findings["audio files"]
    assert device["status"] == "ok" and f"written to {jobs}" in device["detail"], device
    assert files["status"] == "ok" and "made at the first job" in files["detail"], files
    jobs.mkdir()
    _, findings = doctor(tmp_path, dict(os.environ), audio=headless, mqtt={"port": 9})
    assert findings["audio files"]["status"] == "ok"
    assert findings["audio files"]["detail"] == f"{jobs}: writable"
    assert list(jobs.iterdir()) == []  # the probe leaves nothing behind
    occupied = tmp_path / "occupied"
    occupied.write_text("a file where the folder should be")
    beneath = {**headless, "file_dir": str(occupied / "jobs")}
    code, findings = doctor(tmp_path, dict(os.environ), audio=beneath, mqtt={"port": 9})
    files = findings["audio files"]
    assert code == 1 and files["status"] == "fail", files
    assert f"{occupied} is not a directory" in files["detail"] and "audio.file_dir" in files["fix"]


def test_each_voice_is_judged_at_the_precision_the_config_asks_for(tmp_path):
    """`runtime.precision: exact` is what the service loads: doctor says so, not `auto`."""
    _, findings = doctor(
        tmp_path, dict(os.environ), runtime={"precision": "exact"}, mqtt={"port": 9}
    )
    detail = findings["voice en_US-joe-medium"]["detail"]
    assert "; precision exact" in detail and "precision auto" not in detail, detail
