"""A request's text, plain or SSML, made into the script the voices speak: checked, normalised
in each voice's language, split into sentences, with the lexicon applied. Every interface takes
text through here, at acceptance (so bad text is refused before it is queued) and at synthesis."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Protocol

from daemon.config import LexiconConfig, TextConfig
from daemon.errors import TextError, VoiceError
from daemon.text import ssml
from daemon.text.cleaning import clean, complete_sentences_end, split_sentences
from daemon.text.japanese import is_japanese
from daemon.text.lexicon import Lexicon
from daemon.text.normalize import normalize, say_as
from daemon.text.script import Part, Pause, Phonemes, Script, Sound, Utterance


class VoiceDirectory(Protocol):
    """What the text needs to know of the voices (the voice registry offers it)."""

    def require(self, name: str | None = None) -> str: ...

    def choose(self, name: str | None = None, language: str | None = None) -> str: ...

    def language(self, name: str) -> str: ...

    def check(self, name: str, utterance: Utterance) -> None: ...


_lexicons: list[Lexicon] = []


def _lexicon(config: LexiconConfig) -> Lexicon:
    """One compiled lexicon per config in force (a reload brings a new one)."""
    for lexicon in _lexicons:
        if lexicon.config is config:
            return lexicon
    _lexicons[:] = [Lexicon(config), *_lexicons[:3]]
    return _lexicons[0]


def prepare(
    text: object, config: TextConfig, voice: str, voices: VoiceDirectory, *, ssml_text: bool = False
) -> Script:
    """The script of a request in `voice`; raises TextError naming what is wrong. Text that
    starts with `<speak` (or any, with `ssml_text`) is SSML."""
    if not isinstance(text, str):
        raise TextError(f"text must be a string, got {type(text).__name__}")
    if len(text) > config.max_chars:
        raise TextError(
            f"text is {len(text)} characters, above the maximum {config.max_chars} (text.max_chars)"
        )
    base = ssml.Style(voice=voice)
    if ssml_text or ssml.is_ssml(text):
        document = text if ssml.is_ssml(text) else f"<speak>{text}</speak>"
        events = ssml.parse(
            document, max_depth=config.ssml_max_depth, known_voice=voices.require, style=base
        )
    else:
        events = _by_language(text, base, voices)
    script = _Builder(config, voices).build(_with_inline_phonemes(events))
    if not any(isinstance(item, Utterance | Sound) for item in script):
        raise TextError("text is empty (after removing whitespace and control characters)")
    return script


_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
# A sentence's end: a Japanese full stop, question or exclamation mark (spaces or not), or
# . ! ? before a space.
_SENTENCE_END = re.compile(r"(?<=[。！？])\s*|(?<=[.!?])\s+")


def _by_language(text: str, style: ssml.Style, voices: VoiceDirectory) -> list[ssml.Event]:
    """Plain text, each sentence in a voice of its language where the box has one: an English
    sentence inside a Japanese announcement goes to an English voice, a Japanese one inside
    English to a Japanese voice (as SSML's `<voice>` does by hand); a sentence with no letters
    stays with the request's voice."""
    voice = str(style.voice)
    own = "ja" if is_japanese(voices.language(voice)) else "en"
    events: list[ssml.Event] = []
    start = 0
    for end in [match.end() for match in _SENTENCE_END.finditer(text)] + [len(text)]:
        sentence = text[start:end]
        start = end
        if not sentence:
            continue
        wanted = _language_of(sentence) or own
        speaker = voice if wanted == own else _voice_of(voices, wanted, voice)
        last = events[-1] if events else None
        if isinstance(last, ssml.Text) and last.style.voice == speaker:
            events[-1] = ssml.Text(last.text + sentence, last.style)
        else:
            events.append(ssml.Text(sentence, replace(style, voice=speaker)))
    return events


def _language_of(sentence: str) -> str | None:
    """Japanese where its kana and kanji weigh more than its Latin letters (one says about
    what three letters do: "JR東日本をご利用ください" is Japanese, "Welcome to 東京." is
    English); None with neither."""
    japanese, latin = len(_JAPANESE.findall(sentence)), len(_LATIN.findall(sentence))
    if not japanese and not latin:
        return None
    return "ja" if 3 * japanese >= latin else "en"


def _voice_of(voices: VoiceDirectory, language: str, otherwise: str) -> str:
    try:
        return voices.choose(None, language)
    except VoiceError:  # no voice of it here: the request's voice reads it as it can
        return otherwise


# Phonemes written inline, as piper-tts takes them: "Say [[ IPA ]] now."
_INLINE_PHONEMES = re.compile(r"\[\[\s*(?P<symbols>[^\[\]]*?)\s*\]\]")


def _with_inline_phonemes(events: list[ssml.Event]) -> list[ssml.Event]:
    """Each `[[ phonemes ]]` of a text (plain or inside SSML) as a run of phonemes, spoken as
    written and checked against the voice's phoneme set like SSML's `<phoneme>`."""
    found: list[ssml.Event] = []
    for event in events:
        if not isinstance(event, ssml.Text) or event.say_as is not None or "[[" not in event.text:
            found.append(event)
            continue
        start = 0
        for match in _INLINE_PHONEMES.finditer(event.text):
            if not match.group("symbols"):
                raise TextError("[[ ]] holds no phonemes: write them between the brackets")
            if match.start() > start:
                found.append(ssml.Text(event.text[start : match.start()], event.style))
            found.append(ssml.PhonemeRun(match.group("symbols"), event.style))
            start = match.end()
        if start < len(event.text):
            found.append(ssml.Text(event.text[start:], event.style))
    return found


class _Builder:
    def __init__(self, config: TextConfig, voices: VoiceDirectory) -> None:
        self.config = config
        self.voices = voices
        self.lexicon = _lexicon(config.lexicon)
        self.items: list[Utterance | Pause | Sound] = []
        self.parts: list[Part] = []
        self.style = ssml.Style()

    def build(self, events: list[ssml.Event]) -> Script:
        for event in events:
            if isinstance(event, ssml.Text):
                self._text(event)
            elif isinstance(event, ssml.PhonemeRun):
                self._restyle(event.style)
                self.parts.append(Phonemes(event.symbols))
            elif isinstance(event, ssml.Break):
                self._flush()
                self.items.append(Pause(event.seconds))
            elif isinstance(event, ssml.Sound):
                self._flush()
                self.items.append(Sound(event.name))
            else:
                self._flush()
        self._flush()
        return tuple(self.items)

    def _text(self, event: ssml.Text) -> None:
        style = event.style
        language = style.language or self.voices.language(str(style.voice))
        for index, paragraph in enumerate(clean(event.text).split("\n\n")):
            if index:
                self._flush()
            if not paragraph:
                continue
            self._restyle(style)
            if event.say_as is not None:
                self._add(say_as(paragraph, *event.say_as, language), style)
                continue
            words = normalize(paragraph, language) if self.config.normalize else paragraph
            end = min(len(words), complete_sentences_end(words + " "))
            longest = self.config.max_sentence_chars
            for sentence in split_sentences(words[:end], longest):
                self._add(sentence, style)
                self._flush()
            rest = split_sentences(words[end:], longest)
            for index_in_rest, piece in enumerate(rest):
                self._add(piece, style)
                if index_in_rest < len(rest) - 1:
                    self._flush()

    def _add(self, words: str, style: ssml.Style) -> None:
        self._restyle(style)
        self.parts.extend(self.lexicon.apply(words, str(style.voice)))

    def _restyle(self, style: ssml.Style) -> None:
        """A new voice, rate or volume mid-sentence ends the piece before it, joined without
        the sentence pause."""
        if style == self.style or not self.parts:
            self.style = style
            return
        self._flush()
        self.items.append(Pause(0.0))
        self.style = style

    def _flush(self) -> None:
        """Ends the utterance being built (at a sentence's end, a break or a change of style)."""
        if not self.parts:
            return
        style = self.style
        voice = str(style.voice)
        utterance = Utterance(tuple(self.parts), voice, style.rate, style.volume)
        self.voices.check(voice, utterance)
        self.items.append(utterance)
        self.parts = []
