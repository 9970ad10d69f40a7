"""A Kokoro voice installed as a user installs it (`voices install`, its test sentence and its
build): `voices show` says where it came from and the loudness the install measured, and it may
be the config's default voice."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # loads the 82M graph and builds the voice

ALPHA = "ja_JP-kokoro-jf_alpha"


def test_an_installed_kokoro_voice_shows_its_measured_loudness_and_may_be_the_default(tmp_path):
    box = {
        "catalog": {"dir": str(tmp_path / "voices")},
        "runtime": {"artifact_dir": str(tmp_path / "artifacts"), "precision": "fp32"},
    }
    config = tmp_path / "fastvoice.yaml"
    config.write_text(json.dumps(box))
    installed = run_cli("voices", "install", ALPHA, "--config", str(config), timeout=900)
    assert installed.returncode == 0, installed.stderr
    assert f"{ALPHA}/kokoro/loudness: measured" in installed.stdout.decode()
    shown = run_cli("voices", "show", ALPHA, "--json", "--config", str(config), timeout=300)
    assert shown.returncode == 0, shown.stderr
    described = json.loads(shown.stdout)
    assert described["source"] == "extra" and described["settings"]["style"] == "jf_alpha"
    assert -30 < described["loudness"]["lufs"]["single"] < -10
    default = tmp_path / "default.yaml"
    default.write_text(json.dumps({**box, "voice": ALPHA}))
    checked = run_cli("config", "check", str(default))
    assert checked.returncode == 0, checked.stderr
