"""`fastvoice say`, `voices` and `devices` as a user runs them: exit codes and messages."""

import json
import os
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EMBEDDED_RATE, run_cli


def wav_seconds(path) -> tuple[int, float]:
    with wave.open(str(path)) as wav:
        return wav.getframerate(), wav.getnframes() / wav.getframerate()


def assert_user_error(result, code: int, message: bytes):
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert b"Traceback" not in result.stderr


def test_say_writes_a_wav_at_the_voice_rate(tmp_path):
    out = tmp_path / "hello.wav"
    result = run_cli("say", "Hello from the kitchen speaker.", "-o", str(out))
    assert result.returncode == 0, result.stderr
    rate, seconds = wav_seconds(out)
    assert rate == EMBEDDED_RATE
    assert 1.0 < seconds < 4.0  # five words, at a speaking rate of roughly 2-4 words a second


def test_say_reads_standard_input(tmp_path):
    out = tmp_path / "stdin.wav"
    result = run_cli("say", "-", "-o", str(out), stdin=b"Reading from a pipe.")
    assert result.returncode == 0, result.stderr
    assert wav_seconds(out)[1] > 0.5


def test_say_plays_on_the_default_device(capture):
    result = run_cli("say", "Playing on the speaker.", env=capture.env())
    assert result.returncode == 0, result.stderr
    # The capture device is not paced: while the rest of a streamed sentence is decoded it
    # takes silence as fast as it is given, so the speech is what counts, not the silences.
    speech = np.count_nonzero(capture.played("default"))
    assert 0.5 < speech / EMBEDDED_RATE < 4.0


def test_say_here_plays_the_configured_lead_in_before_the_speech(capture, tmp_path):
    """`say --local` plays as the service does: `audio.lead_in_ms` of silence first (the
    capture is not paced, so silence the stream itself adds is short: the first block is made
    before the device opens)."""
    config = tmp_path / "fastvoice.yaml"
    config.write_text(json.dumps({"audio": {"lead_in_ms": 800}}))
    result = run_cli("say", "--local", "--config", str(config), "Doors closing.", env=capture.env())
    assert result.returncode == 0, result.stderr
    stream = np.fromfile(capture.files["default"], dtype=np.float32)
    assert np.flatnonzero(stream)[0] >= 0.8 * EMBEDDED_RATE


def test_say_on_a_named_device(capture):
    result = run_cli("say", "Second speaker.", "--device", "speaker_a", env=capture.env())
    assert result.returncode == 0, result.stderr
    assert capture.played("speaker_a").size > 0 and capture.played("default").size == 0


def _has_sound_card() -> bool:
    cards = Path("/proc/asound/cards")
    return cards.exists() and "no soundcards" not in cards.read_text()


@pytest.mark.skipif(_has_sound_card(), reason="needs a machine without a sound card, like CI")
def test_say_with_no_sound_device_suggests_a_file(tmp_path):
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    result = run_cli("say", "Is anybody there?", env=env)
    assert_user_error(
        result, 1, b"no audio output device found; write a file instead with -o out.wav"
    )


def test_unknown_device_is_named(capture):
    result = run_cli("say", "Hi.", "--device", "attic", env=capture.env())
    assert_user_error(result, 1, b"audio device 'attic' is not usable")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", b"text is empty"),
        ("   \x00\x07  ", b"text is empty"),
        ("...", b"the text holds nothing speakable"),
        ("a" * 50_000, b"text is 50000 characters, above the maximum 10000 (text.max_chars)"),
    ],
    ids=["empty", "controls-only", "punctuation-only", "50000-chars"],
)
def test_bad_text_is_a_usage_error(tmp_path, text, message):
    out = tmp_path / "x.wav"
    result = run_cli("say", "-", "-o", str(out), stdin=text.encode(), timeout=60)
    assert_user_error(result, 2, message)
    assert not out.exists()


@pytest.mark.parametrize(
    "text",
    ["Party time 🎉🎉!", "你好，世界。", "Bell\x07 and\ttab\u200b hidden.", "!?"],
    ids=["emoji", "cjk", "controls", "punctuation-words"],
)
def test_odd_text_still_speaks(tmp_path, text):
    out = tmp_path / "odd.wav"
    result = run_cli("say", "-", "-o", str(out), stdin=text.encode(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert wav_seconds(out)[1] > 0.2


def test_max_text_length_is_configurable(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("text:\n  max_chars: 20\n")
    result = run_cli("say", "--config", str(config), "x" * 21, "-o", str(tmp_path / "x.wav"))
    assert_user_error(result, 2, b"above the maximum 20 (text.max_chars)")


def test_binary_junk_on_stdin_is_refused(tmp_path):
    result = run_cli("say", "-", "-o", str(tmp_path / "x.wav"), stdin=bytes(range(128, 256)))
    assert_user_error(result, 2, b"standard input is not UTF-8 text")


def test_unknown_voice_and_speaker(tmp_path):
    out = str(tmp_path / "x.wav")
    assert_user_error(run_cli("say", "Hi.", "--voice", "bob", "-o", out), 2, b"unknown voice 'bob'")
    assert_user_error(run_cli("say", "Hi.", "--speaker", "7", "-o", out), 2, b"single speaker")


def test_out_of_range_option_is_a_usage_error(tmp_path):
    result = run_cli("say", "Hi.", "--volume", "1.5", "-o", str(tmp_path / "x.wav"))
    assert_user_error(result, 2, b"1.5 is outside [0, 1]")


def test_broken_config_names_the_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("audio:\n  volume: 1.7\n")
    result = run_cli("say", "Hi.", "--config", str(config), "-o", str(tmp_path / "x.wav"))
    assert_user_error(result, 2, b"audio.volume: 1.7 is above the maximum 1.0")


def test_unwritable_output_is_a_runtime_error(tmp_path):
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "missing-dir" / "x.wav"))
    assert_user_error(result, 1, b"cannot write")


def test_length_scale_option_slows_speech(tmp_path):
    normal, slow = tmp_path / "n.wav", tmp_path / "s.wav"
    text = "Counting slowly from one to ten."
    assert run_cli("say", text, "-o", str(normal)).returncode == 0
    assert run_cli("say", text, "--length-scale", "1.8", "-o", str(slow)).returncode == 0
    assert wav_seconds(slow)[1] > 1.4 * wav_seconds(normal)[1]


def test_volume_option_scales_the_wav(tmp_path):
    out = tmp_path / "quiet.wav"
    assert run_cli("say", "Quiet please.", "--volume", "0.25", "-o", str(out)).returncode == 0
    with wave.open(str(out)) as wav:
        peak = np.abs(np.frombuffer(wav.readframes(wav.getnframes()), np.int16)).max()
    assert 0.2 * 32767 < peak <= 0.25 * 32767 + 1


def test_voices_lists_the_embedded_voice_and_its_backend():
    result = run_cli("voices", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == "ort-cpu" and report["backend_reason"].startswith("auto: ort-cpu")
    assert report["gpu"] is None
    (voice,) = report["voices"]
    assert voice["name"] == "en_US-joe-medium" and voice["sample_rate"] == EMBEDDED_RATE
    assert voice["language"] == "en_US" and voice["family"] == "vits"
    assert voice["stages"][0]["providers"] == ["CPUExecutionProvider"]
    table = run_cli("voices")
    assert b"en_US-joe-medium*" in table.stdout and b"ort-cpu" in table.stdout
    assert (
        b"backend: auto: ort-cpu; trt and ort-cuda left out: no GPU runtime is installed"
        in table.stdout
    )


def test_devices_lists_output_devices(alsa):
    result = run_cli("devices", env=alsa.env())
    assert result.returncode == 0, result.stderr
    assert b"speaker_a" in result.stdout and b"default" in result.stdout


def commands_of(parser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and action the parser has, found in it (none listed by hand)."""
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*prefix, name))
                found += commands_of(sub, (*prefix, name))
    return found


def test_help_for_every_command():
    from daemon.cli import build_parser

    commands = commands_of(build_parser())
    assert ("voices", "install") in commands and ("system", "install") in commands
    assert len(commands) >= 17
    for command in commands:
        result = run_cli(*command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        if command != ("bench",):  # its options are tools/bench.py's
            assert b"--config" in result.stdout, command


def test_raw_stream_holds_the_same_audio_as_the_wav(tmp_path):
    """Streamed in windows or written whole: the same audio, where the precision is exact
    (where the build's gate let the windows approximate, they differ by what it allows)."""
    text = "Streaming to a pipe. Two sentences."
    config = tmp_path / "exact.yaml"
    config.write_text("runtime:\n  precision: exact\n")
    args = ("--noise-scale", "0", "--noise-w", "0", "--config", str(config))
    raw = run_cli("say", text, "--raw", *args)
    assert raw.returncode == 0, raw.stderr
    out = tmp_path / "same.wav"
    assert run_cli("say", text, "-o", str(out), *args).returncode == 0
    with wave.open(str(out)) as wav:
        from_wav = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    np.testing.assert_allclose(np.frombuffer(raw.stdout, np.int16), from_wav, atol=2)


def test_bench_command_hands_its_options_to_the_benchmark():
    result = run_cli("bench", "--help")
    assert result.returncode == 0, result.stderr
    assert b"--max-clients" in result.stdout and b"stock piper-tts" in result.stdout
    unknown = run_cli("say", "Hi.", "--bogus")
    assert unknown.returncode == 2 and b"unrecognized arguments: --bogus" in unknown.stderr
