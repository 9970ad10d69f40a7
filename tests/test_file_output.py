"""A box without a sound card still serves played jobs: `audio.file_dir` writes each one as a
WAV file (alone with `audio.device: none`, beside the speaker otherwise), and a job that finds no
device gets advice that fits MQTT, not the CLI's `-o`."""

from __future__ import annotations

import json
import os
import uuid
import wave

from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say


def test_without_a_sound_card_each_played_job_is_written_as_a_wav(broker, tmp_path):
    files = tmp_path / "announcements"
    box = Daemon(
        broker,
        tmp_path,
        {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        audio={"device": "none", "file_dir": str(files), "prefill_s": 300},
    )
    try:
        played = say(box, text="Platform two for the nine fifteen.")
        finished = box.recorder.event(played, "finished")
        reply = {"output": "publish", "reply_topic": f"{box.base}/audio/x"}
        published = say(box, text="Not a file.", **reply)
        box.recorder.event(published, "finished")
        info = json.loads(box.recorder.wait_for(lambda t, p: t == f"{box.base}/status/info")[1])
    finally:
        box.stop()
    assert sorted(path.name for path in files.iterdir()) == [f"{played}.wav"]
    with wave.open(str(files / f"{played}.wav")) as wav:
        seconds = wav.getnframes() / wav.getframerate()
        assert wav.getframerate() == EMBEDDED_RATE and wav.getsampwidth() == 2
    assert abs(seconds - finished["audio_s"]) < 0.05
    assert info["audio_device"] == f"none (files in {files})"


def test_a_job_with_no_device_gets_advice_for_its_interface(broker, tmp_path):
    box = Daemon(
        broker,
        tmp_path,
        {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        audio={"device": "missing-speaker"},
    )
    try:
        failed = box.recorder.event(say(box, text="Hello."), "failed")
    finally:
        box.stop()
    assert failed["reason"] == "audio_device"
    assert "set audio.device: none and audio.file_dir" in failed["message"]
    assert "output: publish" in failed["message"] and "-o out.wav" not in failed["message"]


def test_device_none_without_a_file_dir_is_a_config_error(tmp_path):
    config = tmp_path / "fastvoice.yaml"
    config.write_text("audio:\n  device: none\n")
    result = run_cli("config", "check", str(config))
    assert result.returncode == 2
    assert b"audio" in result.stderr and b"set audio.file_dir" in result.stderr
