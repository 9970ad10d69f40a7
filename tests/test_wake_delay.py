"""Measuring a late-waking output through a loop-back (`fastvoice wake-delay`), and writing the
lead-in it advises into the config file."""

import numpy as np
import pytest

from daemon.admin.config_edit import set_block_setting
from daemon.audio.wake_delay import heard_from, sweep
from daemon.errors import AudioDeviceError, ConfigError
from tests.conftest import EMBEDDED_RATE, run_cli

RATE = EMBEDDED_RATE


def returned(played: np.ndarray, swallowed_s: float, latency_s: float, seed: int = 0):
    """What a loop-back brings back of `played` from an amplifier that wakes `swallowed_s`
    late: that much cut, the rest quieter, later by the loop's latency, with hiss."""
    heard = played.copy()
    heard[: round(swallowed_s * RATE)] = 0.0
    heard = np.concatenate([np.zeros(round(latency_s * RATE)), 0.4 * heard, np.zeros(RATE)])
    noise = np.random.default_rng(seed).normal(0.0, 0.003, len(heard))
    return (heard + noise).astype(np.float32)


@pytest.mark.parametrize(("swallowed_s", "latency_s"), [(0.0, 0.0), (0.7, 0.04), (1.5, 0.3)])
def test_the_first_moment_of_the_sweep_heard_names_what_was_swallowed(swallowed_s, latency_s):
    delay = heard_from(returned(sweep(RATE), swallowed_s, latency_s), RATE)
    assert delay.swallowed_ms == pytest.approx(1000 * swallowed_s, abs=20)
    assert delay.latency_ms == pytest.approx(1000 * latency_s, abs=20)
    if swallowed_s:
        assert delay.lead_in_ms >= delay.swallowed_ms + 100 and delay.lead_in_ms % 50 == 0
    else:
        assert delay.lead_in_ms == 0


@pytest.mark.parametrize("kind", ["silence", "hiss", "a steady tone"])
def test_anything_but_the_sweep_is_not_taken_for_it(kind):
    length = 4 * RATE
    recording = {
        "silence": np.zeros(length),
        "hiss": np.random.default_rng(1).normal(0.0, 0.05, length),
        "a steady tone": 0.3 * np.sin(2 * np.pi * 440 / RATE * np.arange(length)),
    }[kind]
    with pytest.raises(AudioDeviceError, match="the sweep was not heard on the input"):
        heard_from(recording.astype(np.float32), RATE)


CONFIG = """\
voice: en_US-joe-medium   # the house voice
audio:   # the hall's amplifier
  volume: 0.8   # loud enough
  lead_in_ms: 0   # measured below
mqtt:
  host: localhost
"""


def test_the_wake_delay_is_measured_through_the_devices_and_saved(capture, tmp_path):
    """The sweep goes out on the output device, the `loopback` input records what the loop
    returns; nothing returned is an error naming the loop-back, a late amplifier's return gives
    its delay, and --save writes the advised lead-in into the config, comments kept."""
    config = tmp_path / "fastvoice.yaml"
    config.write_text(CONFIG)
    capture.loopback_return.write_bytes(np.zeros(5 * RATE, np.float32).tobytes())
    command = ("wake-delay", "--config", str(config), "--input", "loopback")
    silent = run_cli(*command, env=capture.env())
    assert silent.returncode == 1
    assert b"the sweep was not heard on the input: is the loop-back connected" in silent.stderr
    played = capture.played("default")
    expected = sweep(RATE)[1:]  # its first sample is zero; the capture starts at the second
    np.testing.assert_array_equal(played[: len(expected)], expected)

    capture.loopback_return.write_bytes(returned(played[: 3 * RATE], 0.7, 0.06).tobytes())
    measured = run_cli(*command, "--save", env=capture.env())
    assert measured.returncode == 0, measured.stderr
    assert b"the output swallowed 700 ms of a fresh stream (loop latency 60 ms)" in measured.stdout
    assert config.read_text() == CONFIG.replace(
        "lead_in_ms: 0   # measured below", "lead_in_ms: 800   # measured below"
    )
    assert run_cli("config", "check", str(config)).returncode == 0


def test_a_setting_is_added_under_its_block_or_with_it(tmp_path):
    config = tmp_path / "fastvoice.yaml"
    config.write_text("audio:\n    volume: 0.5  # quiet\n")
    set_block_setting(config, "audio", "lead_in_ms", 300)
    assert config.read_text() == "audio:\n    lead_in_ms: 300\n    volume: 0.5  # quiet\n"
    config.write_text("voice: en_US-joe-medium\n")
    set_block_setting(config, "audio", "lead_in_ms", 300)
    assert config.read_text() == "voice: en_US-joe-medium\naudio:\n  lead_in_ms: 300\n"


def test_a_setting_that_cannot_be_written_leaves_the_file_as_it_was(tmp_path):
    config = tmp_path / "fastvoice.yaml"
    config.write_text("audio: {volume: 0.5}\n")
    with pytest.raises(ConfigError, match="flow style; add `lead_in_ms: 300` to it by hand"):
        set_block_setting(config, "audio", "lead_in_ms", 300)
    config.write_text(CONFIG)
    refused = r"not changed: audio\.lead_in_ms: 9000 is above the maximum 5000"
    with pytest.raises(ConfigError, match=refused):
        set_block_setting(config, "audio", "lead_in_ms", 9000)
    assert config.read_text() == CONFIG
    assert [path.name for path in tmp_path.iterdir()] == ["fastvoice.yaml"]
