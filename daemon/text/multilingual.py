"""Announcements in languages other than English: dates, money and marked ordinals through
num2words and Babel (CLDR's month names and number symbols). Plain numbers, percentages and
everything else are left to espeak-ng, which reads them in each of its languages."""

from __future__ import annotations

import datetime
import re
from functools import cache

from daemon.text import numbers

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


def normalize(text: str, language: str) -> str:
    text = _ISO_DATE.sub(lambda match: _date(match, language), text)
    if not numbers.supported(language):
        return text
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
