"""English as an announcement is written, rewritten as it is read aloud: times, dates, phone
numbers, codes, ordinals and plain numbers here; money and measures in english_amounts, titles
and abbreviations in english_words, forms that need more than one number in view in
english_forms.

Rules run in order over the whole text, before it is split into sentences (an abbreviation's
dot is not a sentence end). Each rule's pattern is narrow enough to leave plain text alone;
what no rule takes is left to espeak-ng, which reads plain numbers and words well.
"""

from __future__ import annotations

import re
from functools import cache, partial

from daemon.text import english_amounts, english_forms, english_words, numbers
from daemon.text.english_forms import Rule, spell
from daemon.text.english_words import stop

MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_MONTH_ABBREVIATIONS = {name[:3]: name for name in MONTHS} | {"Sept": "September"}


def _any_case(name: str) -> str:
    """ "July", "july" or "JULY" (not "may": the verb; "May" and "MAY" are the month)."""
    if name == "May":
        return "May|MAY"
    return f"[{name[0]}{name[0].lower()}]{name[1:]}|{name.upper()}"


_MONTH_NAMES = [
    *(_any_case(name) for name in MONTHS),
    *(rf"(?:{_any_case(short)})\.?" for short in _MONTH_ABBREVIATIONS),
]
_MONTH = rf"(?P<month>{'|'.join(_MONTH_NAMES)})"
# A bare four-digit number in these years is read as a year ("nineteen ninety-four").
_YEAR = r"1[1-9]\d\d|20\d\d"
_DAY_SUFFIX = r"(?:st|nd|rd|th)?"
TWO_DIGIT_YEAR_PIVOT = 50


def _year(text: str, language: str) -> str:
    return numbers.year(int(text), language)


def _date_words(day: int, month: int, year: str | None, language: str) -> str:
    name = MONTHS[month - 1]
    said_year = f", {_year(year, language)}" if year else ""
    if language == "en_GB":
        return f"the {numbers.ordinal(day, language)} of {name}{said_year}"
    return f"{name} {numbers.ordinal(day, language)}{said_year}"


def _month_number(text: str) -> int:
    text = text.rstrip(".").capitalize()
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
    if month > 12 >= day:  # "15-01-2020": only one way round is a date
        month, day = day, month
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
    return f"{low} to {high} {meridiem}{stop(match)}"


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
    seconds = int(match.group("seconds") or 0)
    if seconds:
        said += f" and {numbers.cardinal(str(seconds), language)} seconds"
    return said + (stop(match) if meridiem else "")


def _phone(match: re.Match[str], language: str) -> str:
    text = match.group(0)
    groups = re.findall(r"\d+", text)
    said = [numbers.digits(group, language) for group in groups]
    if text.startswith("+"):
        said[0] = "plus " + said[0]
    return ", ".join(said)


def _ordinal(match: re.Match[str], language: str) -> str:
    return numbers.ordinal(int(match.group(1).replace(",", "")), language)  # "1,000th"


def _range(match: re.Match[str], language: str) -> str:
    """ "10-12" → ten to twelve; two years ("1980-1986", "1960-80") as years."""
    low, high = match.group(1), match.group(2)
    if all(re.fullmatch(r"1[5-9]\d\d|20\d\d", part) for part in (low, high)):
        return f"{_year(low, language)} to {_year(high, language)}"
    if re.fullmatch(r"1[5-9]\d\d|20\d\d", low) and len(high) == 2 and int(high) > int(low[2:]):
        return f"{_year(low, language)} to {numbers.cardinal(high, language)}"
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


def _bare_year(match: re.Match[str], language: str) -> str:
    return _year(match.group("year"), language)


def _month_first_dashed(match: re.Match[str], language: str) -> str:
    """ "Jan-15-2020": January fifteenth, twenty twenty."""
    day = int(match.group("day"))
    if not 1 <= day <= 31:
        return match.group(0)
    return _date_words(day, _month_number(match.group("month")), match.group("year"), language)


def _decimal_fraction(match: re.Match[str], language: str) -> str:
    """ ".1665": point one six six five."""
    return f"point {numbers.digits(match.group('digits'), language)}"


def _number(match: re.Match[str], language: str) -> str:
    text = match.group(0)
    digits = text.lstrip("-−").replace(",", "").split(".")[0]
    if len(digits) > 1 and digits.startswith("0"):
        return numbers.digits(text, language)  # "007", "0800"
    return numbers.cardinal(text, language)


# Over 60 lines: a table, one pattern and its reading per line.
@cache
def _figure_rules() -> list[Rule]:
    """Rules for figures, compiled on first use (plain words need none of them)."""
    return [
        (re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b"), _iso_date),
        (re.compile(r"\b(?P<year>\d{4})/(?P<month>\d{1,2})/(?P<day>\d{1,2})\b"), _iso_date),
        (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b"), _numeric_date),
        (re.compile(r"\b(\d{1,2})-(\d{1,2})-(\d{4})\b"), _numeric_date),
        (
            re.compile(rf"\b{_MONTH}-(?P<day>\d{{1,2}})(?:-(?P<year>\d{{4}}))?\b"),
            _month_first_dashed,
        ),
        (
            re.compile(
                r"(?<!\w)(?:\+\d{1,3}(?:[ .-]?\(?\d+\)?){2,}"
                r"|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}"
                r"|\b\d{3}-\d{2}-\d{4}"
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
        (  # "1.59 p.m.": a dot for the colon, with a meridiem that says it is a time
            re.compile(
                r"\b(?P<hours>1[0-2]|0?[1-9])\.(?P<minutes>[0-5]\d)(?P<seconds>)"
                r"\s?(?P<meridiem>[aApP]\.?[mM]\b\.?)"
            ),
            _time,
        ),
        *english_amounts.rules(),
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
        (
            re.compile(rf"(?<![\w.,$£€¥₹#/-])(?P<year>{_YEAR})(?![\w%°/-]|[.,]\d)"),
            _bare_year,
        ),
        (re.compile(r"(?<![\w.,])\.(?P<digits>\d+)\b"), _decimal_fraction),
        (re.compile(r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])"), _number),
    ]


def normalize(text: str, language: str) -> str:
    """The text with what an announcement writes in figures and short forms spelled out."""
    rules = [*english_words.rules(), *english_forms.words()]
    if any(character.isdigit() for character in text):
        rules = [*rules, *english_forms.before(), *_figure_rules(), *english_forms.after()]
    for pattern, replace in rules:
        text = pattern.sub(lambda match, replace=replace: replace(match, language), text)
    return text
