"""What a request's text becomes before any voice runs: utterances (words and phonemes, with the
voice, rate and volume to speak them) and pauses. Plain text, SSML and the lexicon all end here,
so the synthesizer, the phrase cache and `fastvoice text` see one form."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Phonemes:
    """IPA symbols spoken as they are (an SSML `phoneme` or a lexicon entry)."""

    symbols: str


Part = str | Phonemes
_CLOSING = tuple(".,;:!?…)]}\"'”’")


def join_words(pieces: Iterable[str]) -> str:
    """Pieces of text as one: a space between them, none before closing punctuation."""
    joined = ""
    for piece in pieces:
        joined += piece if not joined or piece.startswith(_CLOSING) else " " + piece
    return joined


def split_closing(text: str) -> tuple[str, str]:
    """The closing punctuation `text` starts with, which ends the words before it (the full
    stop after inline phonemes), and the rest of the text."""
    rest = text.lstrip("".join(_CLOSING))
    return text[: len(text) - len(rest)], rest.strip()


@dataclass(frozen=True)
class Utterance:
    """One synthesis call: a sentence, or a piece of one where the voice, rate or volume changes.
    `voice` None is the request's voice; `rate` above 1 is faster; `volume` scales the audio."""

    parts: tuple[Part, ...]
    voice: str | None = None
    rate: float = 1.0
    volume: float = 1.0

    def words(self) -> str:
        return join_words(
            part if isinstance(part, str) else f"[{part.symbols}]" for part in self.parts
        )


@dataclass(frozen=True)
class Pause:
    """Silence in place of the pause between sentences; 0 joins two pieces of one sentence."""

    seconds: float


@dataclass(frozen=True)
class Sound:
    """A sound of the library (an SSML `audio`), played as a sentence of its own."""

    name: str


Script = tuple[Utterance | Pause | Sound, ...]


def describe(item: Utterance | Pause | Sound, voice: str) -> str:
    """One line of `fastvoice text` for a request in `voice`."""
    if isinstance(item, Pause):
        return f"<pause {round(item.seconds * 1000)} ms>"
    if isinstance(item, Sound):
        return f"<sound {item.name}>"
    style = [
        f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
        for name, value, plain in (
            ("voice", item.voice, voice),
            ("rate", item.rate, 1.0),
            ("volume", item.volume, 1.0),
        )
        if value != plain
    ]
    return item.words() + (f"  ({', '.join(style)})" if style else "")


def cache_form(script: Script) -> list[Any]:
    """The script as JSON values, for the phrase cache's key."""
    form: list[Any] = []
    for item in script:
        if isinstance(item, Pause):
            form.append({"pause": item.seconds})
        elif isinstance(item, Sound):
            form.append({"sound": item.name})
        else:
            parts = [p if isinstance(p, str) else {"ipa": p.symbols} for p in item.parts]
            form.append(
                {"parts": parts, "voice": item.voice, "rate": item.rate, "volume": item.volume}
            )
    return form
