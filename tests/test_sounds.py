"""Chimes: built-in sounds made at run time, the operator's files, and a chime as the first part
of a job (the synthesizer, the phrase cache, the CLI and the running service)."""

from __future__ import annotations

import io
import uuid
import wave

import numpy as np
import pytest
import soundfile

from daemon.admin.config_checks import on_box
from daemon.audio.sounds import BUILT_IN, PEAK_LIMIT, TARGET_RMS, SoundLibrary
from daemon.config import parse_config
from daemon.errors import ConfigError, SoundError, TextError
from daemon.service.settings import Settings
from daemon.speech.cache import PhraseCache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions
from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say

RATE = EMBEDDED_RATE
SILENT = SpeechOptions(noise_scale=0.0, noise_w=0.0)  # the same words, the same audio
TEXT = "The shop closes in ten minutes."


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[np.argmax(spectrum)])


@pytest.mark.parametrize("name", sorted(BUILT_IN))
@pytest.mark.parametrize("rate", [16000, 22050, 48000])
def test_built_in_sounds_are_as_loud_as_speech_and_start_without_a_click(name, rate):
    sound = SoundLibrary().render(name, rate)
    assert sound.dtype == np.float32 and len(sound) > 0.5 * rate
    assert rms(sound) == pytest.approx(TARGET_RMS, rel=0.02) or np.abs(sound).max() == (
        pytest.approx(PEAK_LIMIT, rel=1e-3)
    )
    assert np.abs(sound).max() <= PEAK_LIMIT + 1e-6
    assert abs(sound[0]) < 1e-3  # the attack ramps up from silence


def test_dingdong_is_two_tones_falling():
    sound = SoundLibrary().render("dingdong", RATE)
    first, second = sound[: int(0.4 * RATE)], sound[int(0.6 * RATE) : int(1.0 * RATE)]
    assert dominant_hz(first, RATE) == pytest.approx(659.25, abs=5)
    assert dominant_hz(second, RATE) == pytest.approx(523.25, abs=5)


def test_a_file_in_the_sounds_directory_is_a_sound_at_the_voice_rate(tmp_path):
    rate = 44100
    t = np.arange(int(0.8 * rate)) / rate
    tone = 0.02 * np.sin(2 * np.pi * 440 * t)
    soundfile.write(tmp_path / "door.flac", np.stack([tone, tone], axis=1), rate)
    library = SoundLibrary(tmp_path)
    assert "door" in library.names() and "dingdong" in library.names()
    sound = library.render("door", RATE)
    assert len(sound) == pytest.approx(0.8 * RATE, abs=2)
    assert dominant_hz(sound, RATE) == pytest.approx(440, abs=3)
    assert rms(sound) == pytest.approx(TARGET_RMS, rel=0.02)  # a quiet file is brought up


def test_unknown_unreadable_and_too_long_sounds_are_named(tmp_path):
    (tmp_path / "junk.wav").write_bytes(b"RIFF\x00\x00not a wave file at all")
    soundfile.write(tmp_path / "speech.wav", np.zeros(31 * 8000, np.float32), 8000)
    library = SoundLibrary(tmp_path)
    with pytest.raises(SoundError, match=r"unknown sound 'foghorn'; known: .*dingdong"):
        library.check("foghorn")
    with pytest.raises(SoundError, match=r"cannot read sound file .*junk\.wav"):
        library.render("junk", RATE)
    with pytest.raises(SoundError, match=r"lasts 31\.0 s, above 30"):
        library.render("speech", RATE)
    library.check("none")


def test_config_names_a_chime_that_does_not_exist_by_its_key():
    with pytest.raises(ConfigError, match=r"sounds\.chime_by_priority\.high: unknown sound 'bell'"):
        on_box(parse_config({"sounds": {"chime_by_priority": {"high": "bell"}}}))


@pytest.fixture
def cached(registry, config, tmp_path):
    cache = PhraseCache(tmp_path / "phrases", max_bytes=10_000_000)
    return Synthesizer(registry, Settings(config), cache), cache


def test_the_chime_comes_first_then_the_speech_and_both_are_cached_together(cached):
    synthesizer, cache = cached
    chime = SoundLibrary().render("attention", RATE)
    first = list(synthesizer.synthesize(TEXT, options=SILENT, chime="attention"))
    np.testing.assert_array_equal(first[0].samples, chime)
    assert first[0].sentence_end and len(first) > 1
    again = list(synthesizer.synthesize(TEXT, options=SILENT, chime="attention"))
    assert all(piece.from_cache for piece in again)
    np.testing.assert_array_equal(again[0].samples, chime)
    plain = list(
        synthesizer.synthesize(TEXT, options=SILENT)
    )  # the same words without a chime: not that entry
    assert not any(piece.from_cache for piece in plain)
    np.testing.assert_array_equal(
        np.concatenate([p.samples for p in plain]), np.concatenate([p.samples for p in first[1:]])
    )
    assert (cache.hits, cache.misses) == (1, 2)


def test_the_job_volume_applies_to_the_chime(synthesizer):
    half = next(synthesizer.synthesize(TEXT, options=SpeechOptions(volume=0.5), chime="alarm"))
    np.testing.assert_allclose(half.samples, SoundLibrary().render("alarm", RATE) * 0.5)


def test_an_unknown_chime_fails_before_any_audio(synthesizer):
    with pytest.raises(SoundError, match="unknown sound 'gong'"):
        next(synthesizer.synthesize(TEXT, chime="gong"))


def test_ssml_audio_plays_a_sound_between_sentences(synthesizer):
    pieces = list(
        synthesizer.synthesize(
            '<speak>Doors closing. <audio src="attention"/> Mind the gap.</speak>'
        )
    )
    chime = SoundLibrary().render("attention", RATE)
    where = [i for i, piece in enumerate(pieces) if np.array_equal(piece.samples, chime)]
    assert len(where) == 1 and 0 < where[0] < len(pieces) - 1
    with pytest.raises(SoundError, match="unknown sound 'klaxon'"):
        next(synthesizer.synthesize('<speak>Hello. <audio src="klaxon"/></speak>'))
    text = run_cli("text", '<speak>Hello. <audio src="attention"/> Bye.</speak>')
    assert b"<sound attention>" in text.stdout


def test_a_sound_alone_is_an_announcement(synthesizer):
    """SSML with only `<audio>` plays the sound (a signal with no words); with nothing at
    all it is still an empty text."""
    pieces = list(synthesizer.synthesize('<speak><audio src="alarm"/></speak>'))
    (played,) = [piece.samples for piece in pieces if piece.samples.size]
    np.testing.assert_array_equal(played, SoundLibrary().render("alarm", RATE))
    with pytest.raises(TextError, match="text is empty"):
        next(synthesizer.synthesize("<speak> <break time='1s'/> </speak>"))


def test_say_with_a_chime_writes_it_before_the_speech(tmp_path):
    env = {"FASTVOICE_SOCKET": str(tmp_path / "none.sock"), "PATH": "/usr/bin:/bin"}
    plain, chimed = tmp_path / "plain.wav", tmp_path / "chimed.wav"
    for out, extra in ((plain, ()), (chimed, ("--chime", "dingdong"))):
        silent = ("--noise-scale", "0", "--noise-w", "0")
        result = run_cli("say", TEXT, "-o", str(out), "--no-cache", *silent, *extra, env=env)
        assert result.returncode == 0, result.stderr
    plain_audio, _ = soundfile.read(plain, dtype="float32")
    chimed_audio, _ = soundfile.read(chimed, dtype="float32")
    chime = SoundLibrary().render("dingdong", RATE)
    pause = round(0.2 * RATE)
    assert len(chimed_audio) == pytest.approx(len(plain_audio) + len(chime) + pause, abs=2)
    middle = slice(RATE // 10, len(chime) - RATE // 10)  # away from the faded edges
    np.testing.assert_allclose(chimed_audio[middle], chime[middle], atol=2 / 32767)
    bad = run_cli("say", TEXT, "-o", str(out), "--chime", "gong", env=env)
    assert bad.returncode == 2 and b"unknown sound 'gong'" in bad.stderr


def test_the_service_plays_the_chime_of_the_priority_and_refuses_unknown_ones(
    broker, capture, tmp_path
):
    sounds = tmp_path / "sounds"
    sounds.mkdir()
    t = np.arange(RATE // 2) / RATE
    soundfile.write(sounds / "door.wav", 0.3 * np.sin(2 * np.pi * 330 * t), RATE)
    daemon = Daemon(
        broker,
        tmp_path,
        capture.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        sounds={"dir": str(sounds), "chime_by_priority": {"high": "door"}},
    )
    try:

        def published(**fields) -> np.ndarray:
            topic = f"{daemon.base}/reply/{uuid.uuid4().hex[:8]}"
            job = say(daemon, text=TEXT, output="publish", reply_topic=topic, **fields)
            daemon.recorder.event(job, "finished")
            _, payload, _ = daemon.recorder.wait_for(lambda t, p: t == topic)
            with wave.open(io.BytesIO(payload)) as wav:
                frames = wav.readframes(wav.getnframes())
            return np.frombuffer(frames, np.int16).astype(np.float32) / 32767

        door = SoundLibrary(sounds).render("door", RATE)
        pause = round(0.2 * RATE)

        def starts_with_door(audio: np.ndarray) -> bool:
            start = audio[: len(door)]
            likeness = np.dot(start, door) / (np.linalg.norm(start) * np.linalg.norm(door))
            return likeness > 0.9

        high = published(priority="high")
        assert starts_with_door(high)
        assert np.abs(high[len(door) : len(door) + pause]).max() < 1e-3  # then the pause
        assert not starts_with_door(published(priority="normal"))
        assert not starts_with_door(published(priority="high", chime="none"))
        for fields in (
            {"text": TEXT, "chime": "foghorn"},
            {"text": '<speak>Hello. <audio src="foghorn"/></speak>'},
        ):
            job = say(daemon, **fields)
            rejected = daemon.recorder.event(job, "rejected")
            assert "unknown sound 'foghorn'" in rejected["message"]
    finally:
        daemon.stop()
