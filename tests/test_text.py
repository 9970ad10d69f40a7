import pytest

from daemon.config import TextConfig
from daemon.errors import TextError
from daemon.text.cleaning import clean, complete_sentences_end, split_sentences
from daemon.text.prepare import prepare


def test_clean_drops_controls_and_invisible_characters():
    assert clean("a\x00b\x07c\u200bd\u202ee\ufeff") == "abcde"


def test_clean_collapses_whitespace_but_keeps_paragraphs():
    assert clean("  one\ttwo\n three  \n\n\n four ") == "one two three\n\nfour"


def test_sentences_split_after_terminal_punctuation_and_paragraphs():
    text = clean('He said "stop!" Then left. Why? Because.\n\nNew paragraph without end')
    assert split_sentences(text, 400) == [
        'He said "stop!"',
        "Then left.",
        "Why?",
        "Because.",
        "New paragraph without end",
    ]


def test_decimal_points_and_abbreviation_dots_without_space_do_not_split():
    assert split_sentences("Pi is 3.14 today.", 400) == ["Pi is 3.14 today."]


def test_long_sentence_is_cut_at_a_pause_within_the_limit():
    sentence = "alpha beta gamma, " * 10 + "end"
    pieces = split_sentences(sentence, 60)
    assert all(len(piece) <= 60 for piece in pieces)
    assert all(piece.endswith(",") for piece in pieces[:-1])
    assert " ".join(pieces).split() == sentence.split()


def test_unbroken_run_is_cut_hard():
    pieces = split_sentences("x" * 250, 100)
    assert [len(p) for p in pieces] == [100, 100, 50]


def test_prepare_refuses_text_over_the_configured_maximum(registry):
    with pytest.raises(TextError, match=r"text is 101 characters, above the maximum 100"):
        prepare("a" * 101, TextConfig(max_chars=100), registry.default, registry)


@pytest.mark.parametrize("text", ["", "   \n\t ", "\x00\x01\u200b", "<speak> </speak>"])
def test_prepare_refuses_empty_text(registry, text):
    with pytest.raises(TextError, match="text is empty"):
        prepare(text, TextConfig(), registry.default, registry)


@pytest.mark.parametrize("value", [None, 42, b"bytes", ["list"]])
def test_prepare_refuses_non_strings(registry, value):
    with pytest.raises(TextError, match="text must be a string"):
        prepare(value, TextConfig(), registry.default, registry)


def test_cjk_full_stops_split_without_spaces():
    assert split_sentences("你好。世界！好吗？", 400) == ["你好。", "世界！", "好吗？"]


@pytest.mark.parametrize(
    ("streamed", "complete"),
    [
        ("Doors close. Dr. Smith is", "Doors close. "),
        ("Turn left on St. James", ""),
        ("Bring pens, e.g. blue ones. Then", "Bring pens, e.g. blue ones. "),
        ("Gate 4 closes. Next", "Gate 4 closes. "),
    ],
)
def test_streamed_text_is_not_cut_after_a_short_forms_dot(streamed, complete):
    assert streamed[: complete_sentences_end(streamed)] == complete
