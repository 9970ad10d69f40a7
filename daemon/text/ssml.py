"""The SSML subset fastvoice speaks, parsed into a flat run of events for the script builder.

The XML parser is defusedxml's: a DTD (and with it entity expansion and external entities) is
refused before anything is expanded. Every tag, attribute and value outside the subset is an
error that names it: SSML that is not understood is never read aloud.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from daemon.errors import TextError

if TYPE_CHECKING:  # the XML parser is imported only for SSML
    from xml.etree.ElementTree import Element

SSML_NAMESPACE = "{http://www.w3.org/2001/10/synthesis}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
SCHEMA_LOCATION = "{http://www.w3.org/2001/XMLSchema-instance}schemaLocation"
LONGEST_BREAK_S = 10.0
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.4,
    "strong": 0.75,
    "x-strong": 1.2,
}
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
VOLUMES = {
    "silent": 0.0,
    "x-soft": 0.3,
    "soft": 0.6,
    "medium": 1.0,
    "default": 1.0,
    "loud": 1.4,
    "x-loud": 2.0,
}
# Emphasis as a small change of rate and volume: (rate, volume).
EMPHASIS = {
    "strong": (0.85, 1.3),
    "moderate": (0.92, 1.15),
    "none": (1.0, 1.0),
    "reduced": (1.1, 0.8),
}
SOUND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NEUTRAL_PITCH = re.compile(r"default|medium|[+-]?0+(?:\.0+)?(?:%|Hz|st)?")
# The attributes each tag takes (xml:lang is taken where SSML allows it).
ATTRIBUTES = {
    "speak": {"version", XML_LANG, SCHEMA_LOCATION},
    "p": {XML_LANG},
    "s": {XML_LANG},
    "break": {"time", "strength"},
    "prosody": {"rate", "volume", "pitch"},
    "say-as": {"interpret-as", "format", "detail"},
    "sub": {"alias"},
    "phoneme": {"alphabet", "ph"},
    "voice": {"name", XML_LANG},
    "emphasis": {"level"},
    "audio": {"src"},
}


@dataclass(frozen=True)
class Style:
    """How a stretch of text is spoken; nested tags multiply rates and volumes."""

    voice: str | None = None
    language: str | None = None
    rate: float = 1.0
    volume: float = 1.0


@dataclass(frozen=True)
class Text:
    text: str
    style: Style
    say_as: tuple[str, str | None] | None = None  # (interpret-as, format)


@dataclass(frozen=True)
class PhonemeRun:
    symbols: str
    style: Style


@dataclass(frozen=True)
class SentenceBoundary:
    """The end of an `s` or `p`: what follows starts a new sentence."""


@dataclass(frozen=True)
class Break:
    seconds: float


@dataclass(frozen=True)
class Sound:
    """`<audio src="NAME"/>`: a sound of the library (daemon.audio.sounds) by its name."""

    name: str


Event = Text | PhonemeRun | SentenceBoundary | Break | Sound


def is_ssml(text: str) -> bool:
    """SSML starts with <speak>; an XML declaration or a DTD is taken as SSML too, to be
    parsed (and a DTD refused) rather than read aloud."""
    return text.lstrip().startswith(("<speak", "<?xml", "<!DOCTYPE"))


def parse(
    text: str, *, max_depth: int, known_voice: Callable[[str], None], style: Style
) -> list[Event]:
    """The events of an SSML document; `known_voice` raises for a voice that does not exist."""
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root = fromstring(text, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as error:
        raise TextError(f"SSML refused: {type(error).__name__} (no DTDs or entities)") from None
    except ParseError as error:
        raise TextError(f"SSML is not well-formed XML: {error}") from None
    if _tag(root) != "speak":
        raise TextError(f"SSML must have <speak> at its root, not <{_tag(root)}>")
    return list(_Walker(max_depth, known_voice).walk(root, style, 1))


def _tag(element: Element) -> str:
    tag = element.tag if isinstance(element.tag, str) else "?"
    return tag[len(SSML_NAMESPACE) :] if tag.startswith(SSML_NAMESPACE) else tag


def _attribute_name(name: str) -> str:
    return {XML_LANG: "xml:lang", SCHEMA_LOCATION: "xsi:schemaLocation"}.get(name, name)


def _language(element: Element, style: Style) -> Style:
    language = element.get(XML_LANG)
    return replace(style, language=language.replace("-", "_")) if language else style


def break_seconds(element: Element) -> float:
    time_value, strength = element.get("time"), element.get("strength")
    if time_value is not None:
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*", time_value)
        if found is None:
            raise TextError(f'<break time="{time_value}">: a time is like "700ms" or "1.5s"')
        seconds = float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)
        if seconds > LONGEST_BREAK_S:
            raise TextError(
                f'<break time="{time_value}">: longer than the longest break, {LONGEST_BREAK_S:g} s'
            )
        return seconds
    if strength is not None:
        if strength not in BREAK_STRENGTHS:
            raise TextError(
                f'<break strength="{strength}">: not one of {", ".join(BREAK_STRENGTHS)}'
            )
        return BREAK_STRENGTHS[strength]
    return BREAK_STRENGTHS["medium"]


def _rate(value: str) -> float:
    if value in RATES:
        return RATES[value]
    found = re.fullmatch(r"([+-]?)(\d+(?:\.\d+)?)(%?)", value.strip())
    if found is None:
        raise TextError(
            f'<prosody rate="{value}">: use {", ".join(RATES)}, a percentage ("80%", "+20%") '
            "or a factor (1.2)"
        )
    sign, number, percent = found.group(1), float(found.group(2)), found.group(3)
    if sign:
        rate = 1 + (1 if sign == "+" else -1) * number / (100 if percent else 1)
    else:
        rate = number / 100 if percent else number
    if not 0.25 <= rate <= 4.0:
        raise TextError(f'<prosody rate="{value}">: outside 25% to 400% of the normal rate')
    return rate


def _volume(value: str) -> float:
    if value in VOLUMES:
        return VOLUMES[value]
    found = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)dB", value.strip())
    if found is None:
        raise TextError(
            f'<prosody volume="{value}">: use {", ".join(VOLUMES)} or decibels ("+6dB", "-3dB")'
        )
    decibels = float(found.group(1))
    if not -40.0 <= decibels <= 12.0:
        raise TextError(f'<prosody volume="{value}">: outside -40dB to +12dB')
    return float(10 ** (decibels / 20))


class _Walker:
    def __init__(self, max_depth: int, known_voice: Callable[[str], None]) -> None:
        self.max_depth = max_depth
        self.known_voice = known_voice

    def walk(self, element: Element, style: Style, depth: int) -> Iterator[Event]:
        tag = _tag(element)
        if tag not in ATTRIBUTES:
            raise TextError(
                f"SSML tag <{tag}> is not supported (supported: {', '.join(ATTRIBUTES)})"
            )
        if depth > self.max_depth:
            raise TextError(
                f"SSML is nested deeper than {self.max_depth} tags (text.ssml_max_depth)"
            )
        for name in element.attrib:
            if name not in ATTRIBUTES[tag]:
                raise TextError(f"<{tag}> has no attribute {_attribute_name(name)!r}")
        if tag == "speak" and depth > 1:
            raise TextError("<speak> inside <speak>")
        if tag in ("break", "audio"):
            yield from self._empty(element, tag)
            return
        if tag in ("phoneme", "sub", "say-as"):
            yield self._leaf(element, tag, style)
            return
        inner = self._style(element, tag, _language(element, style))
        if tag in ("p", "s"):
            yield SentenceBoundary()
        if element.text:
            yield Text(element.text, inner)
        for child in element:
            yield from self.walk(child, inner, depth + 1)
            if child.tail:
                yield Text(child.tail, inner)
        if tag in ("p", "s"):
            yield SentenceBoundary()

    def _empty(self, element: Element, tag: str) -> Iterator[Event]:
        if len(element) or (element.text or "").strip():
            raise TextError(f"<{tag}> must be empty")
        if tag == "break":
            yield Break(break_seconds(element))
            return
        src = element.get("src", "")
        if not SOUND_NAME.fullmatch(src):
            raise TextError(
                f'<audio src="{src}">: src names a sound (dingdong, attention, alarm or a file '
                "of sounds.dir, by its name), not a file or a URL"
            )
        yield Sound(src)

    def _leaf(self, element: Element, tag: str, style: Style) -> Event:
        if len(element):
            raise TextError(f"<{tag}> may hold only text, not <{_tag(element[0])}>")
        content = element.text or ""
        if tag == "phoneme":
            alphabet = element.get("alphabet", "ipa")
            if alphabet != "ipa":
                raise TextError(f'<phoneme alphabet="{alphabet}">: only "ipa" is supported')
            symbols = element.get("ph")
            if not symbols or not symbols.strip():
                raise TextError("<phoneme> needs ph, the IPA to speak")
            return PhonemeRun(symbols.strip(), style)
        if tag == "sub":
            alias = element.get("alias")
            if alias is None:
                raise TextError("<sub> needs alias, the words to say")
            return Text(alias, style)
        interpret_as = element.get("interpret-as")
        if not interpret_as:
            raise TextError("<say-as> needs interpret-as")
        if not content.strip():
            raise TextError(f'<say-as interpret-as="{interpret_as}"> is empty')
        return Text(content, style, say_as=(interpret_as, element.get("format")))

    def _style(self, element: Element, tag: str, style: Style) -> Style:
        if tag == "voice":
            name = element.get("name")
            if not name:
                raise TextError("<voice> needs name, one of the configured voices")
            self.known_voice(name)
            # the new voice's own language, unless xml:lang (applied before) names one
            return replace(
                style, voice=name, language=style.language if element.get(XML_LANG) else None
            )
        if tag == "prosody":
            pitch = element.get("pitch")
            if pitch is not None and not NEUTRAL_PITCH.fullmatch(pitch.strip()):
                raise TextError(
                    f'<prosody pitch="{pitch}">: the voices cannot change their pitch '
                    '(only "default", "medium" or "+0%")'
                )
            rate = _rate(element.get("rate", "default"))
            volume = _volume(element.get("volume", "default"))
            return replace(style, rate=style.rate * rate, volume=style.volume * volume)
        if tag == "emphasis":
            level = element.get("level", "moderate")
            if level not in EMPHASIS:
                raise TextError(f'<emphasis level="{level}">: not one of {", ".join(EMPHASIS)}')
            rate, volume = EMPHASIS[level]
            return replace(style, rate=style.rate * rate, volume=style.volume * volume)
        return style
