"""Plain text cleaned of what a phonemizer chokes on, and split into sentences of bounded length.

Splitting before phonemizing lets the first sentence play while the rest is still being
synthesized, and keeps any one inference small (long unpunctuated runs are cut at a pause).
"""

from __future__ import annotations

import re
import unicodedata

# Sentence ends (with any closing quotes): ASCII forms need a following space, CJK forms don't.
_SENTENCE_END = re.compile(r"([.!?…]+[\"'”’)\]]*)\s+|([。！？]+[\"'”’)\]]*)\s*")
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
_WHITESPACE = re.compile(r"\s+")
_SHORT_FORM_DOT = re.compile(
    r"(?<![\w.])(?:Dr|St|Mr|Mrs|Ms|Prof|Capt|Mt|Ft|No|vs|approx|e\.g|i\.e|Rd|Ave|Blvd)\.$"
)
_PAUSE = re.compile(r"[,;:—–]\s")
# Unicode categories dropped outright: controls, format characters (zero-width, bidi
# overrides), surrogates, private use and unassigned code points.
_DROPPED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn"}


def clean(text: str) -> str:
    """NFC, controls and invisible characters removed, whitespace collapsed; paragraphs kept."""
    text = unicodedata.normalize("NFC", text)
    paragraphs = []
    for paragraph in _PARAGRAPH.split(text):
        kept = "".join(
            " " if ch.isspace() else ch
            for ch in paragraph
            if ch.isspace() or unicodedata.category(ch) not in _DROPPED_CATEGORIES
        )
        kept = _WHITESPACE.sub(" ", kept).strip()
        if kept:
            paragraphs.append(kept)
    return "\n\n".join(paragraphs)


def _cut_long(sentence: str, limit: int) -> list[str]:
    """Cut at the last pause (comma, semicolon …) before the limit, else at a space, else hard."""
    pieces = []
    while len(sentence) > limit:
        window = sentence[: limit + 1]
        pauses = [m.end() for m in _PAUSE.finditer(window)]
        cut = pauses[-1] if pauses else window.rfind(" ") + 1
        if cut <= limit // 4:
            cut = limit
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        pieces.append(sentence)
    return pieces


def split_sentences(text: str, max_sentence_chars: int) -> list[str]:
    """Sentences of cleaned text, none longer than `max_sentence_chars`."""
    sentences: list[str] = []
    for paragraph in text.split("\n\n"):
        start = 0
        for end in _SENTENCE_END.finditer(paragraph):
            sentence = paragraph[start : end.end(end.lastindex)].strip()
            start = end.end()
            if sentence:
                sentences.extend(_cut_long(sentence, max_sentence_chars))
        rest = paragraph[start:].strip()
        if rest:
            sentences.extend(_cut_long(rest, max_sentence_chars))
    return sentences


def complete_sentences_end(text: str) -> int:
    """Where the complete sentences of text still arriving (streamed in chunks) end: the rest
    may be the start of a sentence that goes on in the next chunk. A short form's dot ("Dr.
    Smith") is not taken for an end: normalisation reads it with the words after it."""
    ends = [
        match.end()
        for match in _SENTENCE_END.finditer(text)
        if not (match.group(1) and _SHORT_FORM_DOT.search(text, 0, match.end(1)))
    ]
    return ends[-1] if ends else 0
