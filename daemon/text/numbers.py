"""Numbers as words, in the voice's language, through num2words (imported on first use: most
texts have no digits, and `fastvoice say` pays for every import)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import cache

# num2words' English says "one hundred and five"; American English drops the "and".
_AMERICAN = {"en_US", "en"}
_CURRENCY_SEPARATOR = " |"
LONGEST_NUMBER_DIGITS = 15


@cache
def _language(code: str) -> str | None:
    """num2words' name for a voice language (en_US → en, pt_BR → pt_BR), or None."""
    from num2words import CONVERTER_CLASSES

    for candidate in (code, code.split("_")[0]):
        if candidate in CONVERTER_CLASSES:
            return candidate
    return None


def supported(language: str) -> bool:
    return _language(language) is not None


def _words(value: int | Decimal, language: str, to: str = "cardinal", **kwargs: object) -> str:
    from num2words import num2words

    lang = _language(language) or "en"
    words = num2words(value, lang=lang, to=to, **kwargs)
    if lang == "en" and language in _AMERICAN:
        words = words.replace(" and ", " ")
    return words.replace(",", "")  # "one million, two hundred …": no pause inside a number


def cardinal(text: str, language: str) -> str:
    """A number as written ("1,234", "3.50", "-2"); its decimals digit by digit ("point five
    zero"), as people read prices and measures."""
    text = text.replace(",", "")
    negative = text.startswith(("-", "−"))
    whole, _, fraction = text.lstrip("-−").partition(".")
    if len(whole) > LONGEST_NUMBER_DIGITS:  # nobody says such a number: its digits, one by one
        return digits(text, language)
    words = _words(int(whole or "0"), language)
    if fraction:
        point = _words(Decimal("0.5"), language).split()[-2]  # "point", "Komma", "virgule" …
        words += f" {point} " + " ".join(_words(int(d), language) for d in fraction)
    if negative:
        minus = _words(-1, language).split()[0]
        words = f"{minus} {words}"
    return words


def ordinal(number: int, language: str) -> str:
    return _words(number, language, to="ordinal")


def year(number: int, language: str) -> str:
    try:
        return _words(number, language, to="year")
    except (NotImplementedError, AttributeError):
        return _words(number, language)


def digits(text: str, language: str) -> str:
    return " ".join(_words(int(d), language) for d in text if d.isdigit())


def currency(amount: str, code: str, language: str) -> str | None:
    """An amount of a currency (ISO code) in words, or None where num2words lacks it."""
    try:
        value = Decimal(amount.replace(",", ""))
    except InvalidOperation:
        return None
    if value >= 10**LONGEST_NUMBER_DIGITS:
        return None
    try:
        words = _words(
            value.quantize(Decimal("0.01")),
            language,
            to="currency",
            currency=code,
            separator=_CURRENCY_SEPARATOR,
        )
    except (NotImplementedError, TypeError, KeyError):  # a currency or option it lacks
        return None
    major, _, minor = words.partition(_CURRENCY_SEPARATOR)
    if value == value.to_integral_value():
        return major.strip()
    return f"{major.strip()} {minor.strip()}"
