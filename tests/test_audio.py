"""Playback through a real PortAudio device (ALSA file plugin) and the WAV writer."""

import time
import wave

import numpy as np
import pytest
import soxr

from daemon.audio.pcm import fade_edges, join_sentences, to_int16
from daemon.audio.piece import AudioPiece
from daemon.audio.player import Player, resolve_output
from daemon.audio.wav import write_wav
from daemon.config.audio import AudioConfig
from daemon.errors import AudioDeviceError
from tests.conftest import EMBEDDED_RATE

RATE = EMBEDDED_RATE


def buffered_player(**options) -> Player:
    """The test device plays faster than real time, so a producer can fall behind it and leave
    underrun gaps; buffering the whole utterance first makes the capture exact."""
    return Player(buffer_s=60, prefill_s=60, **options)


@pytest.fixture(scope="module")
def sentences(synthesizer):
    chunks = list(synthesizer.synthesize("Good morning. The bus leaves at nine."))
    assert len(chunks) == 2
    return [c.samples for c in chunks]


def pieces(sentences: list[np.ndarray]) -> list[AudioPiece]:
    """Each sentence as one piece that ends it."""
    return [AudioPiece(samples) for samples in sentences]


def joined(sentences, pause_s=0.2, fade_ms=4.0) -> np.ndarray:
    return np.concatenate(list(join_sentences(pieces(sentences), RATE, pause_s, fade_ms)))


def from_first_nonzero(samples: np.ndarray) -> np.ndarray:
    nonzero = np.flatnonzero(samples)
    return samples[nonzero[0] :]


def test_join_inserts_the_pause_and_fades_every_edge(sentences):
    blocks = list(join_sentences(pieces(sentences), RATE, 0.25, 4.0))
    assert [len(b) for b in blocks] == [len(sentences[0]), int(RATE * 0.25), len(sentences[1])]
    assert not blocks[1].any()
    for block in (blocks[0], blocks[2]):
        assert block[0] == 0.0 and abs(block[-1]) < 1e-6
    np.testing.assert_array_equal(blocks[0][500:-500], sentences[0][500:-500])


def test_a_silence_the_text_asked_for_replaces_the_sentence_pause():
    a, b = np.full(500, 0.5, dtype=np.float32), np.full(500, 0.25, dtype=np.float32)
    silence = AudioPiece(np.zeros(300, np.float32), silence=True)
    blocks = list(join_sentences([AudioPiece(a), silence, AudioPiece(b)], RATE, 0.2, 4.0))
    assert [len(block) for block in blocks] == [500, 300, 500]
    assert blocks[0][-1] == 0.0 and blocks[2][0] == 0.0, "both sentences still fade"


def test_pieces_inside_a_sentence_join_untouched():
    a, b = np.full(500, 0.5, dtype=np.float32), np.full(500, 0.25, dtype=np.float32)
    blocks = list(join_sentences([AudioPiece(a, False), AudioPiece(b)], RATE, 0.2, 4.0))
    assert len(blocks) == 2, "no pause inside a sentence"
    assert blocks[0][0] == 0.0 and blocks[0][-1] == 0.5, "fade in only"
    assert blocks[1][0] == 0.25 and blocks[1][-1] == 0.0, "fade out only"


def test_fade_removes_the_step_at_a_hard_cut():
    step = np.ones(1000, dtype=np.float32)
    faded = fade_edges(step, RATE, 4.0)
    assert faded[0] == 0.0 and faded[-1] == 0.0
    assert np.abs(np.diff(faded)).max() < 0.02


def test_played_audio_equals_what_was_synthesized(capture, sentences):
    assert buffered_player().play(join_sentences(pieces(sentences), RATE, 0.2, 4.0), RATE)
    played = capture.played("default")
    expected = from_first_nonzero(joined(sentences))
    assert len(played) >= len(expected)
    np.testing.assert_array_equal(played[: len(expected)], expected)
    assert not played[len(expected) :].any(), "only silence may follow the speech"


def test_player_volume_scales_what_is_played(capture, sentences):
    buffered_player(volume=0.5).play(join_sentences(pieces(sentences), RATE, 0.2, 4.0), RATE)
    expected = from_first_nonzero(joined(sentences)) * np.float32(0.5)
    np.testing.assert_allclose(capture.played("default")[: len(expected)], expected, atol=1e-7)


def test_named_device_gets_the_audio_and_default_gets_none(capture, sentences):
    buffered_player(device="speaker_a").play(
        join_sentences(pieces(sentences), RATE, 0.2, 4.0), RATE
    )
    expected = from_first_nonzero(joined(sentences))
    np.testing.assert_array_equal(capture.played("speaker_a")[: len(expected)], expected)
    assert capture.played("default").size == 0


def test_output_rate_is_resampled_with_soxr(capture, sentences):
    buffered_player(output_rate=48000).play(join_sentences(pieces(sentences), RATE, 0.2, 4.0), RATE)
    played = np.trim_zeros(capture.played("default"), "b")
    reference = soxr.resample(joined(sentences), RATE, 48000)
    expected_length = len(joined(sentences)) * 48000 / RATE
    assert abs(len(played) - expected_length) < 0.01 * expected_length
    streamed = from_first_nonzero(reference)[: len(played)]
    np.testing.assert_allclose(played[: len(streamed)], streamed, atol=1e-4)


def test_stop_ends_playback_and_drops_the_rest(capture, sentences):
    player = Player(buffer_s=0.5)
    first = joined(sentences)

    def blocks():
        yield first
        player.stop()
        yield first
        yield first

    assert player.play(blocks(), RATE) is False
    assert len(capture.played("default")) < 2 * len(first)


def test_unknown_device_lists_devices_and_suggests_a_file(alsa):
    with pytest.raises(AudioDeviceError) as caught:
        resolve_output("no-such-speaker", RATE)
    message = str(caught.value)
    assert "audio device 'no-such-speaker' is not usable" in message
    assert "speaker_a" in message and "-o out.wav" in message


def test_wav_holds_the_samples_at_the_voice_rate(tmp_path, sentences):
    path = tmp_path / "out.wav"
    frames = write_wav(path, join_sentences(pieces(sentences), RATE, 0.2, 4.0), RATE)
    with wave.open(str(path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (RATE, 1, 2)
        assert wav.getnframes() == frames
        data = np.frombuffer(wav.readframes(frames), dtype=np.int16)
    np.testing.assert_array_equal(data, to_int16(joined(sentences)))


def test_failed_wav_write_leaves_no_file(tmp_path):
    def failing():
        yield np.zeros(100, dtype=np.float32)
        raise RuntimeError("synthesis broke")

    with pytest.raises(RuntimeError):
        write_wav(tmp_path / "out.wav", failing(), RATE)
    assert list(tmp_path.iterdir()) == []


def test_buffer_hands_out_nothing_until_prefilled_or_closed():
    from daemon.audio.player import _BoundedBuffer

    buffer = _BoundedBuffer(capacity=1000, prefill=300)
    out = np.ones(100, dtype=np.float32)
    buffer.put(np.full(200, 0.5, dtype=np.float32))
    assert buffer.take_into(out) == 0
    buffer.put(np.full(200, 0.5, dtype=np.float32))
    assert buffer.take_into(out) == 100 and (out == 0.5).all()
    buffer.close(discard=False)
    assert buffer.take_into(np.zeros(1000, dtype=np.float32)) == 300
    assert buffer.drained


def _held_released(player: Player, within_s: float = 10.0) -> bool:
    """Whether the player let go of its held stream within `within_s` (its timer's doing)."""
    deadline = time.monotonic() + within_s
    while player.describe()["held_open"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_keep_awake_holds_the_output_open_between_jobs_with_its_tone(capture):
    """With `keep_awake_s` the second job plays on the stream the first one opened (the
    capture file, rewritten at each open, holds both), the gap between them carries the 20 Hz
    keep-awake tone at its level, and the stream is let go once the time has passed."""
    player = Player.from_config(AudioConfig(keep_awake_s=0.2, keep_awake_tone_dbfs=-40))
    first, second = np.full(1000, 0.5, np.float32), np.full(1000, -0.5, np.float32)
    assert player.play([first], RATE)
    assert player.describe()["held_open"]
    assert player.play([second], RATE)
    assert _held_released(player)
    stream = np.fromfile(capture.files["default"], dtype=np.float32)
    assert np.count_nonzero(stream == first[0]) == len(first)
    assert np.count_nonzero(stream == second[0]) == len(second)
    first_ends = np.flatnonzero(stream == first[0])[-1] + 1
    second_starts = np.flatnonzero(stream == second[0])[0]
    gap, after = stream[first_ends:second_starts], stream[second_starts + len(second) :]
    level = 10 ** (-40 / 20)
    assert gap.any() and np.abs(gap).max() <= level
    assert np.abs(after).max() == pytest.approx(level, rel=0.01)
    crossings = np.count_nonzero(np.diff(np.signbit(after)))
    assert crossings / (len(after) / RATE) == pytest.approx(2 * 20, rel=0.05)


def test_without_keep_awake_each_job_opens_the_output_again(capture):
    player = Player()
    assert player.play([np.full(1000, 0.5, np.float32)], RATE)
    assert not player.describe()["held_open"]
    assert player.play([np.full(1000, -0.5, np.float32)], RATE)
    played = capture.played("default")
    assert not np.any(played == np.float32(0.5)), "a new stream: the file holds the second only"
    assert np.count_nonzero(played == np.float32(-0.5)) == 1000


def test_a_stopped_job_leaves_the_held_output_to_the_next(capture):
    player = Player.from_config(AudioConfig(keep_awake_s=5))
    player.stop()

    def stopped():
        yield np.full(1000, 0.5, np.float32)
        player.stop()
        yield np.full(1000, 0.25, np.float32)

    assert player.play(stopped(), RATE) is False
    assert player.play([np.full(1000, -0.5, np.float32)], RATE)
    player.release()
    stream = np.fromfile(capture.files["default"], dtype=np.float32)
    assert not np.any(stream == np.float32(0.25))
    assert np.count_nonzero(stream == np.float32(-0.5)) == 1000
