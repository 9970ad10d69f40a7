"""Ducking: fastvoice's playback streams carry `media.role`, so a real PulseAudio with
module-role-ducking lowers a music stream while an announcement plays, and restores it after.

The music is a 15 kHz tone: the voice (22.05 kHz) has nothing above 11 kHz, so the tone's level
in a recording of the speaker is the music's volume, whatever the voice says over it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tools.sound_server import SoundServer

pytestmark = pytest.mark.slow  # plays through a real PulseAudio

RATE = 44100
TONE_HZ = 15000
WINDOW = RATE // 4
LONG_TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(6))


@pytest.fixture
def ducking_server(tmp_path):
    if shutil.which("pulseaudio") is None:
        pytest.fail("pulseaudio is missing: run tools/setup-dev.sh")
    ducking = "module-role-ducking trigger_roles=announce ducking_roles=music volume=20%"
    server = SoundServer(tmp_path / "pulse", modules=(ducking,))
    server.start()
    yield server
    server.kill()


def tone_level(recording: Path) -> float:
    """The tone's amplitude in the last quarter second recorded (0 before there is one)."""
    data = recording.read_bytes()
    samples = np.frombuffer(data[len(data) - 2 * WINDOW :], np.int16) / 32768
    if samples.size < WINDOW:
        return 0.0
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(WINDOW))) / (WINDOW / 4)
    frequencies = np.fft.rfftfreq(WINDOW, 1 / RATE)
    return float(spectrum[np.abs(frequencies - TONE_HZ) < 50].max())


def test_music_is_lowered_while_fastvoice_speaks_and_restored_after(ducking_server, tmp_path):
    env = {**ducking_server.env(), "FASTVOICE_SOCKET": str(tmp_path / "none.sock")}
    tone = tmp_path / "music.raw"
    t = np.arange(120 * RATE) / RATE
    tone.write_bytes((0.5 * 32767 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16).tobytes())
    raw = ("--raw", f"--rate={RATE}", "--channels=1", "--format=s16le")
    recording = tmp_path / "speaker.raw"
    with recording.open("wb") as sink:
        recorder = subprocess.Popen(["parec", "-d", "speaker.monitor", *raw], env=env, stdout=sink)
    music = subprocess.Popen(
        ["pacat", "--playback", *raw, "--property=media.role=music", str(tone)], env=env
    )
    try:
        ducking_server.wait_for(lambda: tone_level(recording) > 0.4)
        full = tone_level(recording)
        fastvoice = str(Path(sys.executable).parent / "fastvoice")
        speaking = subprocess.Popen(
            [fastvoice, "say", LONG_TEXT, "--device", "speaker_pa"], env=env, stderr=subprocess.PIPE
        )
        ducking_server.wait_for(lambda: tone_level(recording) < 0.3 * full)
        assert speaking.poll() is None  # lowered while the announcement plays
        _, stderr = speaking.communicate(timeout=120)
        assert speaking.returncode == 0, stderr
        ducking_server.wait_for(lambda: tone_level(recording) > 0.9 * full)
    finally:
        for process in (music, recorder):
            process.kill()
            process.wait(10)
