"""English amounts read as words: money in its currencies (symbols, codes, magnitudes, pence),
measures with their units (singular before a noun, British spellings), percentages and
temperatures."""

from __future__ import annotations

import re
from functools import cache

from daemon.text import numbers
from daemon.text.english_forms import Rule

_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"


_AMOUNT = rf"(?P<amount>{_NUMBER})"


# Currency: (major singular, major plural, minor singular, minor plural, say "and" between).
_CURRENCIES = {
    "USD": ("dollar", "dollars", "cent", "cents", True),
    "CAD": ("Canadian dollar", "Canadian dollars", "cent", "cents", True),
    "AUD": ("Australian dollar", "Australian dollars", "cent", "cents", True),
    "EUR": ("euro", "euros", "cent", "cents", True),
    "GBP": ("pound", "pounds", "penny", "pence", False),
    "JPY": ("yen", "yen", "", "", False),
    "CHF": ("Swiss franc", "Swiss francs", "centime", "centimes", True),
    "INR": ("rupee", "rupees", "paisa", "paise", True),
    "KRW": ("won", "won", "", "", False),
    "CNY": ("yuan", "yuan", "fen", "fen", True),
}


_SYMBOLS = {"$": "USD", "£": "GBP", "€": "EUR", "¥": "JPY", "₹": "INR", "₩": "KRW"}


_SCALES = {
    "k": "thousand",
    "thousand": "thousand",
    "m": "million",
    "million": "million",
    "bn": "billion",
    "b": "billion",
    "billion": "billion",
    "trillion": "trillion",
}


# Measures after a number: symbol → (singular, plural); British spellings swapped in below.
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "l": ("liter", "liters"),
    "L": ("liter", "liters"),
    "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "s": ("second", "seconds"),
    "sec": ("second", "seconds"),
    "secs": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "kW": ("kilowatt", "kilowatts"),
    "W": ("watt", "watts"),
    "V": ("volt", "volts"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GW": ("gigawatt", "gigawatts"),
    "MW": ("megawatt", "megawatts"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "TB": ("terabyte", "terabytes"),
    "kg/m³": ("kilogram per cubic meter", "kilograms per cubic meter"),
    "m³/h": ("cubic meter per hour", "cubic meters per hour"),
    "m²": ("square meter", "square meters"),
    "m³": ("cubic meter", "cubic meters"),
    "km³": ("cubic kilometer", "cubic kilometers"),
    "cm³": ("cubic centimeter", "cubic centimeters"),
    "cc": ("cubic centimeter", "cubic centimeters"),
    "km²": ("square kilometer", "square kilometers"),
    "cm²": ("square centimeter", "square centimeters"),
    "ft²": ("square foot", "square feet"),
    "tbsp": ("tablespoon", "tablespoons"),
    "tsp": ("teaspoon", "teaspoons"),
    "kbps": ("kilobit per second", "kilobits per second"),
    "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
}


_UNIT_SYMBOLS = "|".join(re.escape(unit) for unit in sorted(_UNITS, key=len, reverse=True))


_BRITISH_SPELLING = (("meter", "metre"), ("liter", "litre"))


def _dialect_words(words: str, language: str) -> str:
    if language == "en_GB":
        for american, british in _BRITISH_SPELLING:
            words = words.replace(american, british)
    return words


def _money_words(amount: str, code: str, scale: str | None, language: str) -> str:
    major_one, major_many, minor_one, minor_many, say_and = _CURRENCIES[code]
    plain = amount.replace(",", "")
    if scale:
        return f"{numbers.cardinal(plain, language)} {_SCALES[scale.lower()]} {major_many}"
    whole, _, fraction = plain.partition(".")
    # Yen has no minor unit, and "$20.506" is no price in cents: the decimals as written.
    if fraction and (not minor_many or len(fraction) > 2):
        return f"{numbers.cardinal(plain, language)} {major_many}"
    cents = int(fraction.ljust(2, "0")[:2]) if fraction else 0
    major = int(whole or "0")
    said = []
    if major or not cents:
        said.append(
            f"{numbers.cardinal(whole or '0', language)} {major_one if major == 1 else major_many}"
        )
    if cents:
        minor = minor_one if cents == 1 else minor_many
        if said and not say_and and cents >= 10:
            said.append(numbers.cardinal(str(cents), language))  # "three pounds fifty"
        else:
            said.append(f"{numbers.cardinal(str(cents), language)} {minor}")
    return " and ".join(said) if say_and else " ".join(said)


def _money_symbol(match: re.Match[str], language: str) -> str:
    code = _SYMBOLS[match.group("symbol")]
    said = _money_words(match.group("amount"), code, match.group("scale"), language)
    return ("minus " if match.group("sign") else "") + said


def _money_code(match: re.Match[str], language: str) -> str:
    return _money_words(match.group("amount"), match.group("code"), None, language)


def _pence(match: re.Match[str], language: str) -> str:
    count = match.group("amount")
    return f"{numbers.cardinal(count, language)} {'penny' if count == '1' else 'pence'}"


def _quantity(text: str, language: str) -> tuple[str, bool]:
    """A number or a range ("10-12") as words, and whether it is exactly one."""
    parts = re.split(r"\s?(?:[–-]|\bto\b)\s?", text)
    said = " to ".join(numbers.cardinal(part, language) for part in parts)
    return said, parts[-1] in ("1", "1.0")


def _attributive(match: re.Match[str]) -> bool:
    """ "a 500 ml bottle": a measure before its noun takes the singular (a five hundred
    milliliter bottle)."""
    before, after = match.string[: match.start()], match.string[match.end() :]
    return bool(re.search(r"\b[Aa]n?\s+$", before)) and bool(
        re.match(r"\s+(?!(?:of|per|in|at|on|to|from|and|or|a|an|the)\b)[a-z]", after)
    )


def _unit(match: re.Match[str], language: str) -> str:
    """ "12 kg" (twelve kilograms), "100 million kg", "12 kg/kg" and "12/kg" (twelve per
    kilogram): a per-unit after a slash is read "per" and singular."""
    said, one = _quantity(match.group("amount"), language)
    if match.group("scale"):
        said, one = f"{said} {_SCALES[match.group('scale').lower()]}", False
    words = []
    if match.group("unit"):
        singular, plural = _UNITS[match.group("unit")]
        words.append(singular if one or _attributive(match) else plural)
    per = match.group("per") or match.group("per_alone")
    if per:
        words.append(f"per {_UNITS[per][0]}")
    return " ".join([said, *(_dialect_words(word, language) for word in words)])


def _percent(match: re.Match[str], language: str) -> str:
    said, _ = _quantity(match.group("amount"), language)
    return ("minus " if match.group("sign") else "") + f"{said} percent"


def _temperature(match: re.Match[str], language: str) -> str:
    amount = match.group("amount")
    said = numbers.cardinal(amount, language)
    if match.group("sign"):
        said = "minus " + said
    scale = {"C": " Celsius", "F": " Fahrenheit", "": ""}[(match.group("scale") or "").upper()]
    return f"{said} {'degree' if amount == '1' else 'degrees'}{scale}"


@cache
def rules() -> list[Rule]:
    """In daemon.text.english's figure rules after times, before ordinals."""
    return [
        (
            re.compile(
                rf"(?P<sign>[-−])?(?P<symbol>[$£€¥₹₩])\s?{_AMOUNT}"
                r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|[mkbMKB])\b)?"
            ),
            _money_symbol,
        ),
        (re.compile(rf"(?<![\w.]){_AMOUNT}\s?(?P<code>{'|'.join(_CURRENCIES)})\b"), _money_code),
        (re.compile(r"(?<![\w.])(?P<amount>\d+)p\b"), _pence),
        (
            re.compile(
                r"(?<![\w.])(?P<sign>[-−])?(?P<amount>\d+(?:\.\d+)?)\s?[°º](?:\s?(?P<scale>[CFcf])(?![a-z]))?"
            ),
            _temperature,
        ),
        (
            re.compile(
                rf"(?<![\w.])(?P<sign>[-−])?(?P<amount>(?:{_NUMBER})(?:\s?(?:[–-]|to)\s?(?:{_NUMBER}))?)\s?%"
            ),
            _percent,
        ),
        (
            re.compile(
                rf"(?<![\w.])(?P<amount>(?:{_NUMBER})(?:\s?[–-]\s?(?:{_NUMBER}))?)"
                r"(?:\s(?P<scale>thousand|million|billion|trillion))?\s?"
                rf"(?:(?P<unit>{_UNIT_SYMBOLS})(?:\s?/\s?(?P<per>{_UNIT_SYMBOLS}))?"
                rf"|/\s?(?P<per_alone>{_UNIT_SYMBOLS}))"
                r"(?![\w/])"
            ),
            _unit,
        ),
    ]
