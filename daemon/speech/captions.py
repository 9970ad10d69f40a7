"""Captions: the words of a request with when they are heard, as WebVTT, SRT or JSON.

The voices time the words they say (after normalisation: "ten forty-five"); a caption shows
what was written ("10:45"). The two are matched word by word where they agree, and a written
form read as other words ("10:45", "$5.50") becomes one cue spanning the words said for it.
Times are seconds from the first sample of the request's audio as it is joined (chime,
sentence pauses and breaks included), so they hold for the WAV file and the stream alike.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from daemon.audio.pcm import SentenceLayout, pause_samples
from daemon.audio.piece import AudioPiece, WordTiming
from daemon.box.files import replaced_atomically
from daemon.errors import FastvoiceError

FORMATS = ("vtt", "srt", "json")


@dataclass(frozen=True)
class Cue:
    start_s: float
    end_s: float
    text: str

    def as_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "start_ms": round(self.start_s * 1000),
            "end_ms": round(self.end_s * 1000),
        }


class WordClock:
    """Follows pieces on their way to be joined and keeps their words' times in the joined
    audio, `lead_s` after its start where an output puts sound before it (a lead-in)."""

    def __init__(self, sample_rate: int, pause_s: float, lead_s: float = 0.0) -> None:
        self.rate = sample_rate
        self.lead_s = lead_s
        self.pause = pause_samples(sample_rate, pause_s)
        self.layout = SentenceLayout()
        self.samples = 0
        self.words: list[WordTiming] = []

    def place(self, piece: AudioPiece) -> list[WordTiming]:
        """The piece's words (if it carries any) in the joined audio's time."""
        pause_before, _ = self.layout.place(piece)
        if pause_before:
            self.samples += self.pause
        start = self.lead_s + self.samples / self.rate
        self.samples += len(piece.samples)
        placed = [WordTiming(w.word, start + w.start_s, start + w.end_s) for w in piece.words]
        self.words.extend(placed)
        return placed

    def follow(self, pieces: Iterable[AudioPiece]) -> Iterator[AudioPiece]:
        for piece in pieces:
            self.place(piece)
            yield piece


# Kana and CJK ideographs: text written without spaces between its words.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def _key(word: str) -> str:
    return re.sub(r"[^\w]", "", word.casefold())


def cues(written: str | None, said: Sequence[WordTiming]) -> list[Cue]:
    """One cue per written word (or per group of written words read as other words); the
    words as said where the written text is not known (SSML)."""
    if written is None:
        return [Cue(w.start_s, w.end_s, w.word) for w in said]
    if _UNSPACED.search(written):
        return _joined_forward(_unspaced_cues(written, said))
    tokens = written.split()
    matcher = difflib.SequenceMatcher(
        None, [_key(t) for t in tokens], [_key(w.word) for w in said], autojunk=False
    )
    made: list[Cue] = []
    for operation, w_from, w_to, s_from, s_to in matcher.get_opcodes():
        if operation == "equal" or (operation == "replace" and w_to - w_from == s_to - s_from):
            pairs = zip(tokens[w_from:w_to], said[s_from:s_to], strict=True)
            made.extend(Cue(w.start_s, w.end_s, token) for token, w in pairs)
        elif operation == "replace":
            text = " ".join(tokens[w_from:w_to])
            made.append(Cue(said[s_from].start_s, said[s_to - 1].end_s, text))
        elif operation == "delete":  # written, not said ("-" read as nothing): joins a neighbour
            text = " ".join(tokens[w_from:w_to])
            if made:
                last = made[-1]
                made[-1] = Cue(last.start_s, last.end_s, f"{last.text} {text}")
            elif s_from < len(said):
                made.append(Cue(said[s_from].start_s, said[s_from].start_s, text))
        elif made:  # said, not written: the cue before lasts until it ends
            last = made[-1]
            made[-1] = Cue(last.start_s, said[s_to - 1].end_s, last.text)
    return _joined_forward(made)


# How far ahead of a reading the written word after it may stand (12月24日 is six characters).
_READING_SPAN = 16
_EDGES = re.compile(r"^\W+|\W+$")  # punctuation and spaces around a written form
_HALF_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}


def _unspaced_cues(written: str, said: Sequence[WordTiming]) -> list[Cue]:
    """Text written without spaces (Japanese): the voice's words are the written ones, each
    its own cue, but for what was read aloud otherwise (12月24日 said as じゅうにがつ
    にじゅうよっか): those said words are one cue showing what stands written between the
    words around them."""
    made: list[Cue] = []
    reading: list[WordTiming] = []  # said words not written so
    at = 0

    def skip_to_a_word(position: int) -> int:
        while position < len(written) and not written[position].isalnum():
            position += 1
        return position

    def written_for(reading: list[WordTiming], until: int) -> None:
        shown = _EDGES.sub("", written[at:until]) or "".join(w.word for w in reading)
        made.append(Cue(reading[0].start_s, reading[-1].end_s, shown))

    for word in said:
        at = skip_to_a_word(at) if not reading else at
        text = word.word.translate(_HALF_WIDTH)  # the front end writes Latin in full width
        found = written.find(text, at, at + len(text) + (_READING_SPAN if reading else 0))
        if found < 0:
            reading.append(word)
            continue
        if reading:
            written_for(reading, found)
            reading = []
        made.append(Cue(word.start_s, word.end_s, text))
        at = found + len(text)
    if reading:
        written_for(reading, len(written))
    return made


def _joined_forward(made: list[Cue]) -> list[Cue]:
    """A cue that would start before the one before it ends starts when that one ends."""
    ordered: list[Cue] = []
    for cue in made:
        if ordered and cue.start_s < ordered[-1].end_s:
            cue = Cue(ordered[-1].end_s, max(cue.end_s, ordered[-1].end_s), cue.text)
        ordered.append(cue)
    return ordered


def _timestamp(seconds: float, separator: str) -> str:
    milliseconds = round(seconds * 1000)
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, milliseconds = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{separator}{milliseconds:03d}"


def webvtt(track: Sequence[Cue]) -> str:
    blocks = [
        f"{_timestamp(c.start_s, '.')} --> {_timestamp(c.end_s, '.')}\n{c.text}" for c in track
    ]
    return "\n\n".join(["WEBVTT", *blocks]) + "\n"


def srt(track: Sequence[Cue]) -> str:
    blocks = [
        f"{n}\n{_timestamp(c.start_s, ',')} --> {_timestamp(c.end_s, ',')}\n{c.text}"
        for n, c in enumerate(track, start=1)
    ]
    return "\n\n".join(blocks) + "\n"


def rendered(track: Sequence[Cue], form: str) -> str:
    if form == "vtt":
        return webvtt(track)
    if form == "srt":
        return srt(track)
    if form == "json":
        return json.dumps([cue.as_dict() for cue in track])
    raise ValueError(f"captions format {form!r}: use one of {', '.join(FORMATS)}")


def form_of(path: Path) -> str:
    """The captions format a file's name asks for (.vtt, .srt, .json)."""
    form = path.suffix.lower().lstrip(".")
    if form not in FORMATS:
        raise FastvoiceError(
            f"captions file {path}: name it .vtt, .srt or .json (the format follows the name)"
        )
    return form


def save(path: Path, track: Sequence[Cue]) -> None:
    """Written whole or not at all."""
    text = rendered(track, form_of(path))
    try:
        with replaced_atomically(path, mode=0o644) as handle:
            handle.write(text.encode("utf-8"))
    except OSError as error:
        raise FastvoiceError(f"cannot write {path}: {error.strerror or error}") from None
