"""English as an announcement is written, rewritten as it is read aloud: times, dates, money,
measures, phone numbers, codes, ordinals and abbreviations.

Rules run in order over the whole text, before it is split into sentences (an abbreviation's
dot is not a sentence end). Each rule's pattern is narrow enough to leave plain text alone;
what no rule takes is left to espeak-ng, which reads plain numbers and words well.
"""

from __future__ import annotations

import re
from functools import cache, partial

from daemon.text import english_forms, numbers
from daemon.text.english_forms import Rule, spell

MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_MONTH_ABBREVIATIONS = {name[:3]: name for name in MONTHS} | {"Sept": "September"}
_MONTH_NAMES = [*MONTHS, *(rf"{short}\.?" for short in _MONTH_ABBREVIATIONS)]
_MONTH = rf"(?P<month>{'|'.join(_MONTH_NAMES)})"
_DAY_SUFFIX = r"(?:st|nd|rd|th)?"
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_AMOUNT = rf"(?P<amount>{_NUMBER})"
TWO_DIGIT_YEAR_PIVOT = 50

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
}
_SYMBOLS = {"$": "USD", "£": "GBP", "€": "EUR", "¥": "JPY", "₹": "INR"}
_SCALES = {
    "k": "thousand",
    "thousand": "thousand",
    "m": "million",
    "million": "million",
    "bn": "billion",
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

# Abbreviations: (pattern, expansion, is a title). A title stands before a name and drops its
# dot; any other keeps its dot where it ended a sentence.
_ABBREVIATIONS = [
    (r"Mr\.", "Mister", True),
    (r"Mrs\.", "Missus", True),
    (r"Ms\.", "Miz", True),
    (r"Prof\.", "Professor", True),
    (r"Capt\.", "Captain", True),
    (r"Mt\.", "Mount", True),
    (r"Ft\.", "Fort", True),
    (r"No\.(?=\s?\d)", "number", True),
    (r"no\.(?=\s?\d)", "number", True),
    (r"Nos\.(?=\s?\d)", "numbers", True),
    (r"Rd\.", "Road", False),
    (r"Ave\.", "Avenue", False),
    (r"Blvd\.", "Boulevard", False),
    (r"Ln\.", "Lane", False),
    (r"Sq\.", "Square", False),
    (r"Hwy\.", "Highway", False),
    (r"Jr\.", "Junior", False),
    (r"Sr\.", "Senior", False),
    (r"Dept\.", "Department", False),
    (r"Apt\.", "Apartment", False),
    (r"approx\.", "approximately", False),
    (r"etc\.", "et cetera", False),
    (r"e\.g\.", "for example", True),
    (r"i\.e\.", "that is", True),
    (r"vs\.?", "versus", True),
    (r"incl\.", "including", True),
]


_TITLES = {"St.", "Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "Capt.", "Mt.", "Ft."}


def _dialect_words(words: str, language: str) -> str:
    if language == "en_GB":
        for american, british in _BRITISH_SPELLING:
            words = words.replace(american, british)
    return words


def _ends_sentence(match: re.Match[str]) -> bool:
    """Whether the dot a match took was also the end of its sentence."""
    rest = match.string[match.end() :]
    return match.group(0).endswith(".") and (not rest.strip() or bool(re.match(r"\s+[A-Z]", rest)))


def _stop(match: re.Match[str]) -> str:
    return "." if _ends_sentence(match) else ""


def _capitalised_word_before(match: re.Match[str]) -> bool:
    """A capitalised word right before the match, which is not the first of its sentence."""
    words = match.string[: match.start()].split()
    if not words or not words[-1][:1].isupper():
        return False
    if len(words) == 1:
        return False
    previous = words[-2]
    return not (previous.endswith((".", "!", "?", ":", ";")) and previous not in _TITLES)


def _capitalised_word_after(match: re.Match[str]) -> bool:
    return re.match(r"\s+[A-Z]", match.string[match.end() :]) is not None


def _saint_or_street(match: re.Match[str], language: str) -> str:
    if _capitalised_word_after(match) and not _capitalised_word_before(match):
        return "Saint"
    return "Street" + _stop(match)


def _doctor_or_drive(match: re.Match[str], language: str) -> str:
    if _capitalised_word_after(match) and not _capitalised_word_before(match):
        return "Doctor"
    return "Drive" + _stop(match)


def _abbreviation(expansion: str, title: bool, match: re.Match[str], language: str) -> str:
    return expansion if title else expansion + _stop(match)


def _year(text: str, language: str) -> str:
    return numbers.year(int(text), language)


def _date_words(day: int, month: int, year: str | None, language: str) -> str:
    name = MONTHS[month - 1]
    said_year = f", {_year(year, language)}" if year else ""
    if language == "en_GB":
        return f"the {numbers.ordinal(day, language)} of {name}{said_year}"
    return f"{name} {numbers.ordinal(day, language)}{said_year}"


def _month_number(text: str) -> int:
    text = text.rstrip(".")
    name = _MONTH_ABBREVIATIONS.get(text, text)
    return MONTHS.index(name) + 1


def _iso_date(match: re.Match[str], language: str) -> str:
    year, month, day = (match.group(n) for n in ("year", "month", "day"))
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):  # a code written like a date
        return ", ".join(numbers.digits(group, language) for group in (year, month, day))
    return _date_words(int(day), int(month), year, language)


def _numeric_date(match: re.Match[str], language: str) -> str:
    first, second, year = int(match.group(1)), int(match.group(2)), match.group(3)
    month, day = (second, first) if language == "en_GB" else (first, second)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    if len(year) == 2:  # "98" is 1998, "26" is 2026: a fixed pivot, so a text always reads alike
        year = f"{'19' if int(year) > TWO_DIGIT_YEAR_PIVOT else '20'}{year}"
    return _date_words(day, month, year, language)


def _named_month_date(match: re.Match[str], language: str, *, day_first: bool) -> str:
    """ "4 July 2025" (day first: the fourth of July) or "July 4th, 2025" (July fourth)."""
    day = int(match.group("day"))
    if not 1 <= day <= 31:
        return match.group(0)
    name = MONTHS[_month_number(match.group("month")) - 1]
    year = match.group("year")
    said_year = f", {_year(year, language)}" if year else ""
    if not day_first:
        return f"{name} {numbers.ordinal(day, language)}{said_year}"
    article = "" if re.search(r"\bthe\s+$", match.string[: match.start()], re.I) else "the "
    return f"{article}{numbers.ordinal(day, language)} of {name}{said_year}"


def clock(hours: int, minutes: int, meridiem: str | None, language: str) -> str:
    """A time of day as it is said: "eight AM", "ten forty-five", "nine oh five PM"."""
    said = numbers.cardinal(str(hours), language)
    if minutes == 0:
        if meridiem:
            said += f" {meridiem}"
        elif hours >= 13 or hours == 0:
            said = "zero hundred" if hours == 0 else f"{said} hundred"
        else:
            said += " o'clock"
        return said
    if minutes < 10:
        said += f" oh {numbers.cardinal(str(minutes), language)}"
    else:
        said += f" {numbers.cardinal(str(minutes), language)}"
    return said + (f" {meridiem}" if meridiem else "")


def _meridiem(text: str | None) -> str | None:
    return None if not text else ("AM" if text[0].lower() == "a" else "PM")


def _hour_range(match: re.Match[str], language: str) -> str:
    """ "2-4 pm": two to four PM."""
    low, high = (numbers.cardinal(match.group(n), language) for n in (1, 2))
    meridiem = _meridiem(match.group("meridiem"))
    return f"{low} to {high} {meridiem}{_stop(match)}"


def _digit_string(match: re.Match[str], language: str) -> str:
    """Numbers that are dialled or keyed in: "call 911", "the code is 4821"."""
    return f"{match.group('cue')} {numbers.digits(match.group('digits'), language)}"


def _flight(match: re.Match[str], language: str) -> str:
    said_digits = numbers.digits(match.group("digits"), language)
    return f"{match.group('cue')} {spell(match.group('letters'), language)} {said_digits}"


def _time(match: re.Match[str], language: str) -> str:
    hours, minutes = int(match.group("hours")), int(match.group("minutes") or 0)
    meridiem = _meridiem(match.group("meridiem"))
    if meridiem and not 1 <= hours <= 12:
        return match.group(0)
    said = clock(hours, minutes, meridiem, language)
    if match.group("seconds"):
        seconds = int(match.group("seconds"))
        said += f" and {numbers.cardinal(str(seconds), language)} seconds"
    return said + (_stop(match) if meridiem else "")


def _phone(match: re.Match[str], language: str) -> str:
    text = match.group(0)
    groups = re.findall(r"\d+", text)
    said = [numbers.digits(group, language) for group in groups]
    if text.startswith("+"):
        said[0] = "plus " + said[0]
    return ", ".join(said)


def _money_words(amount: str, code: str, scale: str | None, language: str) -> str:
    major_one, major_many, minor_one, minor_many, say_and = _CURRENCIES[code]
    plain = amount.replace(",", "")
    if scale:
        return f"{numbers.cardinal(plain, language)} {_SCALES[scale.lower()]} {major_many}"
    whole, _, fraction = plain.partition(".")
    if fraction and not minor_many:  # yen has no minor unit: read the decimals as written
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
        if said and not say_and:
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
    said, one = _quantity(match.group("amount"), language)
    singular, plural = _UNITS[match.group("unit")]
    chosen = singular if one or _attributive(match) else plural
    return f"{said} {_dialect_words(chosen, language)}"


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


def _ordinal(match: re.Match[str], language: str) -> str:
    return numbers.ordinal(int(match.group(1).replace(",", "")), language)  # "1,000th"


def _range(match: re.Match[str], language: str) -> str:
    """ "10-12" → ten to twelve; two years ("1980-1986") as years."""
    low, high = match.group(1), match.group(2)
    if all(re.fullmatch(r"1[5-9]\d\d|20\d\d", part) for part in (low, high)):
        return f"{_year(low, language)} to {_year(high, language)}"
    return f"{numbers.cardinal(low, language)} to {numbers.cardinal(high, language)}"


def _code(match: re.Match[str], language: str) -> str:
    letters, digits, suffix = match.group("letters"), match.group("digits"), match.group("suffix")
    if len(digits) <= 2 and not digits.startswith("0"):
        said_digits = numbers.cardinal(digits, language)
    else:
        said_digits = numbers.digits(digits, language)
    return " ".join(filter(None, (spell(letters, language), said_digits, spell(suffix, language))))


def _number_letter(match: re.Match[str], language: str) -> str:
    return f"{numbers.cardinal(match.group(1), language)} {spell(match.group(2), language)}"


def _year_in_context(match: re.Match[str], language: str) -> str:
    return f"{match.group('cue')} {_year(match.group('year'), language)}"


def _number(match: re.Match[str], language: str) -> str:
    text = match.group(0)
    digits = text.lstrip("-−").replace(",", "").split(".")[0]
    if len(digits) > 1 and digits.startswith("0"):
        return numbers.digits(text, language)  # "007", "0800"
    return numbers.cardinal(text, language)


@cache
def _figure_rules() -> list[Rule]:
    """Rules for figures, compiled on first use (plain words need none of them)."""
    return [
        (re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b"), _iso_date),
        (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b"), _numeric_date),
        (
            re.compile(
                r"(?<!\w)(?:\+\d{1,3}(?:[ .-]?\(?\d+\)?){2,}"
                r"|\(\d{3}\) ?\d{3}[ .-]\d{4}"
                r"|\b(?:1[ .-])?\d{3}[.-]\d{3}[.-]\d{4}"
                r"|\b0\d{2,4}[ -]\d{3,4}(?:[ -]\d{3,4})?"
                r"|\b\d{3}-\d{4})\b(?![.,]?\d)"
            ),
            _phone,
        ),
        (
            re.compile(
                rf"(?<![$£€¥₹])\b(?P<day>\d{{1,2}}){_DAY_SUFFIX}\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?\b"
            ),
            partial(_named_month_date, day_first=True),
        ),
        (
            re.compile(
                rf"\b{_MONTH}\s+(?P<day>\d{{1,2}}){_DAY_SUFFIX}(?:,?\s+(?P<year>\d{{4}}))?\b"
            ),
            partial(_named_month_date, day_first=False),
        ),
        (
            re.compile(
                r"\b(1[0-2]|0?[1-9])\s?[–-]\s?(1[0-2]|0?[1-9])\s?(?P<meridiem>[aApP]\.?[mM]\b\.?)"
            ),
            _hour_range,
        ),
        (
            re.compile(r"\b(?P<cue>[Ff]light)\s+(?P<letters>[A-Z]{2})\s?(?P<digits>\d{1,4})\b"),
            _flight,
        ),
        (
            re.compile(
                r"\b(?P<cue>(?:[Cc]all|[Dd]ial|[Tt]ext)(?: us)?(?: at| on)?"
                r"|(?:code|PIN|pin|password)(?: is)?:?)\s+(?P<digits>\d{3,})\b(?![.,]\d)"
            ),
            _digit_string,
        ),
        (
            re.compile(
                r"\b(?P<hours>[01]?\d|2[0-3]):(?P<minutes>[0-5]\d)(?::(?P<seconds>[0-5]\d))?"
                r"(?:\s?(?P<meridiem>[aApP]\.?[mM]\b\.?))?"
            ),
            _time,
        ),
        (
            re.compile(
                r"\b(?P<hours>1[0-2]|0?[1-9])\s?(?P<minutes>)(?P<seconds>)(?P<meridiem>[aApP]\.?[mM]\b\.?)"
            ),
            _time,
        ),
        (
            re.compile(
                rf"(?P<sign>[-−])?(?P<symbol>[$£€¥₹])\s?{_AMOUNT}"
                r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|[mk])\b)?"
            ),
            _money_symbol,
        ),
        (re.compile(rf"(?<![\w.]){_AMOUNT}\s?(?P<code>{'|'.join(_CURRENCIES)})\b"), _money_code),
        (re.compile(r"(?<![\w.])(?P<amount>\d+)p\b"), _pence),
        (
            re.compile(
                r"(?<![\w.])(?P<sign>[-−])?(?P<amount>\d+(?:\.\d+)?)\s?°\s?(?P<scale>[CFcf](?![a-z]))?"
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
                rf"(?<![\w.])(?P<amount>(?:{_NUMBER})(?:\s?[–-]\s?(?:{_NUMBER}))?)\s?"
                rf"(?P<unit>{_UNIT_SYMBOLS})"
                r"(?![\w/])"
            ),
            _unit,
        ),
        (re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th)\b"), _ordinal),
        (
            re.compile(
                r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)\s?[–-]\s?(\d{1,3}(?:,\d{3})+|\d+)"
                r"(?!\d|[\w.,]\d)"
            ),
            _range,
        ),
        (re.compile(r"\b(?P<letters>[A-Z]{1,3})(?P<digits>\d{1,5})(?P<suffix>[A-Z]?)\b"), _code),
        (re.compile(r"\b(\d{1,3})([A-Z])\b"), _number_letter),
        (
            re.compile(
                r"\b(?P<cue>[Ii]n|[Ss]ince|[Uu]ntil|[Bb]efore|[Aa]fter|[Ff]rom|[Oo]f|[Bb]y|[Yy]ear)"
                r"\s+(?P<year>1[1-9]\d\d|20\d\d)\b(?![.,]\d)"
            ),
            _year_in_context,
        ),
        (re.compile(r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])"), _number),
    ]


@cache
def _word_rules() -> list[Rule]:
    return [
        (re.compile(r"\bSt\.(?=\s|$)"), _saint_or_street),
        (re.compile(r"\bDr\.(?=\s|$)"), _doctor_or_drive),
        *(
            (
                re.compile(rf"(?<![\w.]){pattern}(?=\s|$|[,;:!?])"),
                partial(_abbreviation, expansion, title),
            )
            for pattern, expansion, title in _ABBREVIATIONS
        ),
        (re.compile(r"\s&\s"), lambda match, language: " and "),
        (re.compile(r"#(?=\d)"), lambda match, language: "number "),
    ]


def normalize(text: str, language: str) -> str:
    """The text with what an announcement writes in figures and short forms spelled out."""
    rules = [*_word_rules(), *english_forms.words()]
    if any(character.isdigit() for character in text):
        rules = [*rules, *english_forms.before(), *_figure_rules(), *english_forms.after()]
    for pattern, replace in rules:
        text = pattern.sub(lambda match, replace=replace: replace(match, language), text)
    return text
