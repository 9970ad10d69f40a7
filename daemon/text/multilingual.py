"""Announcements in languages other than English: dates, clock times, money and marked ordinals
through num2words and Babel (CLDR's month names and number symbols). Plain numbers, percentages
and everything else are left to espeak-ng, which reads them in each of its languages (but not
"3." before a month, which it reads as the end of a sentence, nor "14:30", which it reads as
two numbers)."""

from __future__ import annotations

import datetime
import re
from functools import cache

from daemon.text import japanese, numbers

_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY", "₽": "RUB", "zł": "PLN", "kr": "SEK"}
_CODES = ("EUR", "USD", "GBP", "JPY", "CHF", "RUB", "PLN", "SEK", "NOK", "DKK", "CZK", "BRL")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# Ordinals as these languages mark them: 1er, 2e, 3ème (fr); 1º, 1ª, 2.º (es, it, pt).
_MARKED_ORDINAL = {
    "fr": re.compile(r"\b(\d+)(?:er|re|e|ème|eme)\b"),
    "es": re.compile(r"\b(\d+)\.?[ºª°]"),
    "it": re.compile(r"\b(\d+)\.?[ºª°]"),
    "pt": re.compile(r"\b(\d+)\.?[ºª°]"),
}


@cache
def _symbols(language: str) -> tuple[str, str]:
    """The language's decimal mark and digit group separator."""
    from babel.core import UnknownLocaleError
    from babel.numbers import get_decimal_symbol, get_group_symbol

    try:
        return get_decimal_symbol(language), get_group_symbol(language)
    except (UnknownLocaleError, ValueError, LookupError):  # a language CLDR does not know
        return ".", ","


def _amount_pattern(language: str) -> str:
    decimal, group = _symbols(language)
    group_class = re.escape(group) + (r"\s" if group.isspace() else "")
    cents = rf"(?:{re.escape(decimal)}\d{{1,2}})?"
    return rf"\d{{1,3}}(?:[{group_class}]\d{{3}})+{cents}|\d+{cents}"


def _plain_amount(text: str, language: str) -> str:
    decimal, group = _symbols(language)
    text = re.sub(r"\s", "", text.replace(group, "")) if group else text
    return text.replace(decimal, ".")


def _date(match: re.Match[str], language: str) -> str:
    from babel.core import UnknownLocaleError
    from babel.dates import format_date

    try:
        day = datetime.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        said = format_date(day, format="long", locale=language)
    except (ValueError, UnknownLocaleError):
        return match.group(0)
    if numbers.supported(language):  # "3. Dezember" → "dritter Dezember"
        said = re.sub(r"\b(\d+)\.", lambda m: numbers.ordinal(int(m.group(1)), language), said)
    return said


def _money(amount: str, code: str, language: str, original: str) -> str:
    said = numbers.currency(_plain_amount(amount, language), code, language)
    return said if said is not None else original


# Clock times as an announcer reads them: "14:30 Uhr" → "vierzehn Uhr dreißig", "14h30" →
# "quatorze heures trente". Each language: (hour word(s) after the hour, one o'clock's hour
# word, hour and minutes joined by). Hours above 24 or minutes above 59 are not times.
_CLOCK = {
    "de": ("Uhr", "ein", " Uhr "),
    "fr": ("heures", "une", " heures "),
    "es": ("horas", "una", " y "),
    "it": ("", "una", " e "),
    "nl": ("uur", "een", " uur "),
    "pt": ("horas", "uma", " e "),
}
# A word for "o'clock" that may follow the time in the text and is said already.
_CLOCK_WORD = {"de": "Uhr", "fr": "heures?", "nl": "uur", "es": "horas", "pt": "horas"}
# German day-and-month ("am 3. Oktober"): after these words the ordinal takes the dative.
_GERMAN_DATIVE = re.compile(r"(?:\b(?:am|vom|zum|dem|im|bis|ab|seit)\s+)$", re.I)
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})([./-])(\d{1,2})\2(\d{4}|\d{2})\b")


def _hour_minutes(hours: int, minutes: int, language: str) -> str:
    hour_word, one, joined = _CLOCK[language]
    hour = one if hours == 1 else numbers.cardinal(str(hours), language)
    if minutes == 0:
        return f"{hour} {hour_word}".strip() if hour_word else hour
    if language == "fr" and hours == 1:
        joined = " heure "
    return f"{hour}{joined}{numbers.cardinal(str(minutes), language)}"


def _clock_times(text: str, language: str) -> str:
    base = language.split("_")[0]
    if base not in _CLOCK:
        return text
    said = _CLOCK_WORD.get(base)
    after = rf"(?:\s*{said}\b)?" if said else ""
    separator = r"(?::|\s?h\s?)" if base == "fr" else ":"
    pattern = re.compile(rf"\b([01]?\d|2[0-4]){separator}([0-5]\d)(?![\d:]){after}")

    def spoken(match: re.Match[str]) -> str:
        return _hour_minutes(int(match.group(1)), int(match.group(2)), base)

    text = pattern.sub(spoken, text)
    if base == "fr":  # "14h" alone
        text = re.sub(
            r"\b([01]?\d|2[0-4])\s?h\b", lambda m: _hour_minutes(int(m.group(1)), 0, base), text
        )
    return text


@cache
def _month_names(language: str) -> dict[str, int]:
    """Month names and abbreviations (with and without their dot), lower-cased, to numbers."""
    from babel.core import UnknownLocaleError
    from babel.dates import get_month_names

    names: dict[str, int] = {}
    try:
        for width in ("wide", "abbreviated"):
            for number, name in get_month_names(width, locale=language).items():
                names[name.lower()] = number
                names[name.lower().rstrip(".")] = number
    except (UnknownLocaleError, ValueError, LookupError):
        pass
    return names


def _wide_month(number: int, language: str) -> str:
    from babel.dates import get_month_names

    return get_month_names("wide", locale=language)[number]


def _german_ordinal(day: int, before: str) -> str:
    """ "dritten" after am/vom/zum, else "dritter"."""
    stem = numbers.ordinal(day, "de")  # "dritte"
    return stem + ("n" if _GERMAN_DATIVE.search(before) else "r")


def _german_day_month(text: str) -> str:
    months = _month_names("de")
    alternatives = "|".join(sorted(map(re.escape, months), key=len, reverse=True))
    pattern = re.compile(rf"\b([12]?\d|3[01])\.\s*({alternatives})(?=\W|$)", re.I)

    def spoken(match: re.Match[str]) -> str:
        month = _wide_month(months[match.group(2).lower()], "de")
        # "bis 15. Okt." at the end of the text: the abbreviation's dot ends the sentence too.
        end = "." if match.group(2).endswith(".") and not text[match.end() :].strip() else ""
        return f"{_german_ordinal(int(match.group(1)), text[: match.start()])} {month}{end}"

    return pattern.sub(spoken, text)


def _numeric_date(match: re.Match[str], text: str, language: str) -> str:
    """Day-month-year as written in these languages (3.10.2026, 03/10/26)."""
    day, month, year = int(match.group(1)), int(match.group(3)), int(match.group(4))
    if match.group(2) == "/" and language.startswith("en"):
        return match.group(0)
    year += 2000 if len(match.group(4)) == 2 else 0
    try:
        datetime.date(year, month, day)
        month_name = _wide_month(month, language)
    except (ValueError, LookupError):
        return match.group(0)
    base = language.split("_")[0]
    year_said = numbers.year(year, language)
    if base == "de":
        return f"{_german_ordinal(day, text[: match.start()])} {month_name} {year_said}"
    day_said = numbers.ordinal(1, language) if day == 1 and base == "fr" else str(day)
    if base in ("es", "pt"):
        return f"{day_said} de {month_name} de {year_said}"
    return f"{day_said} {month_name} {year_said}"


def normalize(text: str, language: str) -> str:
    if language.split("_")[0] == "ja":  # its reader has its own numbers and counters
        return japanese.normalize(text)
    text = _ISO_DATE.sub(lambda match: _date(match, language), text)
    if not numbers.supported(language):
        return text
    text = _NUMERIC_DATE.sub(lambda match: _numeric_date(match, text, language), text)
    if language.split("_")[0] == "de":
        text = _german_day_month(text)
    text = _clock_times(text, language)
    amount = _amount_pattern(language)
    symbols = "|".join(re.escape(symbol) for symbol in _SYMBOLS)
    text = re.sub(
        rf"(?P<symbol>{symbols})\s?(?P<amount>{amount})|(?<![\w.,])(?P<amount2>{amount})\s?"
        rf"(?P<after>{symbols}|{'|'.join(_CODES)})(?!\w)",
        lambda m: _money(
            m.group("amount") or m.group("amount2"),
            _SYMBOLS.get(m.group("symbol") or m.group("after"), m.group("after")),
            language,
            m.group(0),
        ),
        text,
    )
    ordinal = _MARKED_ORDINAL.get(language.split("_")[0])
    if ordinal is not None:
        text = ordinal.sub(lambda m: numbers.ordinal(int(m.group(1)), language), text)
    return text
