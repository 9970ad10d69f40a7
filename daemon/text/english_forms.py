"""English readings of written forms that need more than one number in view: decades,
fractions and mixed numbers, IP addresses, durations with seconds, money ranges and per-unit
prices, magnitudes after amounts, math signs, Roman numerals of monarchs and chapters, time
zones, serial codes, street numbers, business quarters; and forms
rewritten into ones daemon.text.english reads (dotted dates as ISO dates, units in capitals as
their symbols).

`words` runs on every text; `before` ahead of daemon.text.english's figure rules (it takes the
forms those would read number by number), `after` once they are done (it joins what they left:
"dollars/mo").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from daemon.text import numbers

Rule = tuple[re.Pattern[str], Callable[[re.Match[str], str], str]]

# What a denominator is called, one and many; the rest are ordinals ("fifth", "fifths").
_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}
_PER = {
    "mo": "month", "month": "month", "wk": "week", "week": "week", "yr": "year", "year": "year",
    "day": "day", "d": "day", "hr": "hour", "hour": "hour", "night": "night",
    "person": "person",
}  # fmt: skip
_REGNAL = (
    "Henry|Louis|Elizabeth|George|Edward|Charles|William|Richard|James|Mary|Victoria|John|"
    "Philip|Frederick|Peter|Catherine|Napoleon|Pius|Benedict|Leo|Gregory|Paul|Alexander|Ramesses"
)
_CHAPTER = "[Cc]hapter|[Pp]art|[Vv]olume|[Bb]ook|[Aa]ct|[Ss]cene|[Ss]ection|[Aa]rticle|[Pp]hase"
_ROMAN = r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
# Units written in capitals or small letters alike ("12KG", "3 mbps"), and the symbol
# daemon.text.english reads.
_ANY_CASE_UNITS = {
    "kg": "kg", "km": "km", "cm": "cm", "mm": "mm", "mg": "mg", "kwh": "kWh", "mph": "mph",
    "kbps": "kbps", "mbps": "Mbps", "gbps": "Gbps",
}  # fmt: skip


_TIME_ZONES = (
    "UTC|GMT|EST|EDT|CST|CDT|MST|MDT|PST|PDT|AKST|HST|CET|CEST|EET|EEST|WET|BST|IST|JST|AEST|AEDT"
)
_CURRENCY_CODES = "USD|EUR|GBP|JPY|CHF|CAD|AUD|INR"
# A street's type as written, and as it is said.
_STREET_TYPES = {
    "St": "Street", "Ave": "Avenue", "Rd": "Road", "Blvd": "Boulevard", "Ln": "Lane",
    "Dr": "Drive", "Pl": "Place", "Ct": "Court", "Sq": "Square", "Hwy": "Highway",
    "Expy": "Expressway", "Pkwy": "Parkway", "Fwy": "Freeway", "Cir": "Circle",
    "Ter": "Terrace", "Trl": "Trail",
}  # fmt: skip
_STREET = (
    r"(?:Street|Avenue|Road|Boulevard|Lane|Drive|Way|Place|Court|Square|Highway|Expressway"
    r"|Parkway|Freeway|Circle|Terrace|Trail"
    r"|(?:" + "|".join(f"{short}|{short.lower()}" for short in _STREET_TYPES) + r")\b\.?)"
)
_DIRECTIONS = {"N": "North", "S": "South", "E": "East", "W": "West"}
_STATES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California",
    "CO": "Colorado", "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia",
    "HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa",
    "KS": "Kansas", "KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland",
    "MA": "Massachusetts", "MI": "Michigan", "MN": "Minnesota", "MS": "Mississippi",
    "MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada",
    "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico", "NY": "New York",
    "NC": "North Carolina", "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma",
    "OR": "Oregon", "PA": "Pennsylvania", "RI": "Rhode Island", "SC": "South Carolina",
    "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas", "UT": "Utah", "VT": "Vermont",
    "VA": "Virginia", "WA": "Washington", "WV": "West Virginia", "WI": "Wisconsin",
    "WY": "Wyoming", "DC": "D C",
}  # fmt: skip
# An uppercase letter alone: "A" between words is read as the article, so it is respelled.
_LETTER_NAMES = {"A": "eigh"}


def spell(text: str, language: str) -> str:
    """Letters one by one and digits one by one: "BA2490" → "B eigh two four nine zero"."""
    said = []
    for character in text:
        if character.isdigit():
            said.append(numbers.digits(character, language))
        elif character.isalpha():
            said.append(_LETTER_NAMES.get(character.upper(), character.upper()))
    return " ".join(said)


def _time_zone(match: re.Match[str], language: str) -> str:
    return f"{match.group('time')} {spell(match.group('zone'), language)}"


def _serial(match: re.Match[str], language: str) -> str:
    """SN-4471-XK2 → S N, four four seven one, X K two: each group keyed in one by one."""
    return ", ".join(spell(group, language) for group in match.group(0).split("-"))


def _house_number(match: re.Match[str], language: str) -> str:
    """1600 → sixteen hundred, 221 → two twenty-one, 2005 → twenty oh five: street numbers
    are read in pairs, as years are (one or two digits as they are)."""
    digits = match.group("number")
    said = numbers.cardinal(digits, language) if len(digits) <= 2 else _pairs(digits, language)
    letter = f" {spell(match.group('letter'), language)}" if match.group("letter") else ""
    return f"{said}{letter} {_street(match.group('street'))}{_end(match)}"


def _pairs(digits: str, language: str) -> str:
    head, tail = digits[:-2], int(digits[-2:])
    said = numbers.cardinal(head, language)
    if tail == 0:
        return f"{said} hundred"
    oh = "oh " if tail < 10 else ""
    return f"{said} {oh}{numbers.cardinal(str(tail), language)}"


def _end(match: re.Match[str]) -> str:
    """The dot of "St." that also ended the text."""
    ends = match.group("street").endswith(".") and not match.string[match.end() :].strip()
    return "." if ends else ""


def _street(name: str) -> str:
    """ "N 1st St" → "North 1st Street": the direction and the type as they are said."""
    words = name.split()
    if words[0] in _DIRECTIONS and len(words) > 1:
        words[0] = _DIRECTIONS[words[0]]
    words[-1] = _STREET_TYPES.get(words[-1].rstrip(".").capitalize(), words[-1])
    return " ".join(words)


def _state_zip(match: re.Match[str], language: str) -> str:
    """ ", CA 95051": California, nine five zero five one (a ZIP code is read digit by digit)."""
    state = _STATES[match.group("state")]
    if match.group("zip") is None:
        return f"{match.group('lead')}{state}"
    zip_code = ", ".join(numbers.digits(part, language) for part in match.group("zip").split("-"))
    return f"{match.group('lead')}{state}{match.group('between')}{zip_code}"


def _zone_after_meridiem(match: re.Match[str], language: str) -> str:
    """ "p.m.est", "p.m. e.s.t": the zone apart and in capitals, as the time-zone rule reads it."""
    zone = match.group("zone").replace(".", "").upper()
    return f"{match.group('meridiem').rstrip('.')} {zone}"


def _quarter(match: re.Match[str], language: str) -> str:
    year = numbers.year(int(match.group("year")), language)
    return f"Q {numbers.cardinal(match.group('q'), language)} {year}"


def _plural(words: str) -> str:
    """ "nineteen eighty" → "nineteen eighties"; "two thousand" → "two thousands"."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def _decade(match: re.Match[str], language: str) -> str:
    return _plural(numbers.year(int(match.group("decade")), language))


def _decade_range(match: re.Match[str], language: str) -> str:
    """ "1960s-80s": nineteen sixties to eighties."""
    end = match.group("full")
    said_end = (
        numbers.year(int(end), language) if end else numbers.cardinal(match.group("tens"), language)
    )
    return f"{_decade(match, language)} to {_plural(said_end)}"


def _short_decade(match: re.Match[str], language: str) -> str:
    lead = match.group("lead").strip("'’")  # "the '80s": the apostrophe is not said
    return lead + _plural(numbers.cardinal(match.group("tens"), language))


def _fraction_words(numerator: int, denominator: int, language: str) -> str:
    one, many = _DENOMINATORS.get(denominator, (None, None))
    if one is None:
        one = numbers.ordinal(denominator, language)
        many = one + "s"
    if numerator == 1:
        return f"one {one}"
    return f"{numbers.cardinal(str(numerator), language)} {many}"


def _fraction(match: re.Match[str], language: str) -> str:
    """ "3/4", "31/32", "1/4th", "22/3". A pair that can be a month and a day ("12/25", "3/14")
    with a denominator over 16 is left alone, as is one with no fraction in it ("5/5")."""
    numerator, denominator = int(match.group("num")), int(match.group("den"))
    proper = 0 < numerator < denominator
    improper = numerator > 31 or (numerator > denominator and 1 < denominator <= 10 < numerator)
    if not (proper or improper) or (numerator <= 12 < 16 < denominator <= 31):
        return match.group(0)
    return _fraction_words(numerator, denominator, language)


def _mixed_number(match: re.Match[str], language: str) -> str:
    """ "2 1/2": two and a half; "3 5/2": three and five halves."""
    whole, numerator, denominator = (int(match.group(n)) for n in ("whole", "num", "den"))
    if not (numerator > 0 and 1 < denominator <= 16 and numerator != denominator):
        return match.group(0)
    if numerator == 1 and denominator in (2, 4):
        part = f"a {_DENOMINATORS[denominator][0]}"
    else:
        part = _fraction_words(numerator, denominator, language)
    return f"{numbers.cardinal(str(whole), language)} and {part}"


def _ip_address(match: re.Match[str], language: str) -> str:
    parts = match.group(0).split(".")
    if any(int(part) > 255 for part in parts):
        return match.group(0)
    return " dot ".join(numbers.digits(part, language) for part in parts)


def _dotted_date(match: re.Match[str], language: str) -> str:
    """15.01.2020 (day first, as it is written where dots are used) as the ISO date that
    daemon.text.english reads."""
    day, month, year = (int(match.group(n)) for n in (1, 2, 3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{year:04d}-{month:02d}-{day:02d}"


def _duration(match: re.Match[str], language: str) -> str:
    """1:01:01 → one hour, one minute and one second (a clock has no seconds to say)."""
    said = []
    for value, unit in zip(
        (int(match.group(n)) for n in (1, 2, 3)), ("hour", "minute", "second"), strict=True
    ):
        if value:
            said.append(
                f"{numbers.cardinal(str(value), language)} {unit}{'' if value == 1 else 's'}"
            )
    if not said:
        return "zero seconds"
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


def _roman_value(text: str) -> int:
    total = 0
    for index, letter in enumerate(text):
        value = _ROMAN_VALUES[letter]
        following = _ROMAN_VALUES[text[index + 1]] if index + 1 < len(text) else 0
        total += -value if value < following else value
    return total


def _regnal(match: re.Match[str], language: str) -> str:
    ordinal = numbers.ordinal(_roman_value(match.group("numeral")), language)
    return f"{match.group('name')} the {ordinal.capitalize()}"


def _chapter(match: re.Match[str], language: str) -> str:
    value = numbers.cardinal(str(_roman_value(match.group("numeral"))), language)
    return f"{match.group('cue')} {value}"


def _any_case_unit(match: re.Match[str], language: str) -> str:
    return f"{match.group('amount')} {_ANY_CASE_UNITS[match.group('unit').lower()]}"


def _per(match: re.Match[str], language: str) -> str:
    return f"{match.group('money')} per {_PER[match.group('per').lower()]}"


def _month_abbreviation(match: re.Match[str], language: str) -> str:
    """ "jan. 15" → "Jan. 15", which daemon.text.english reads as a date."""
    return match.group(1).capitalize() + "."


# Over 60 lines: a table, one pattern and its reading per entry.
@cache
def before() -> list[Rule]:
    number = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
    return [
        (
            re.compile(r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b"),
            _ip_address,
        ),
        (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), _dotted_date),
        (
            re.compile(
                r"(?P<meridiem>\b[aApP]\.[mM]\.)\s?"
                rf"(?P<zone>(?:{_TIME_ZONES})|(?:[a-zA-Z]\.){{2,3}}[a-zA-Z]?\.?)\b",
                re.IGNORECASE,
            ),
            _zone_after_meridiem,
        ),
        (
            re.compile(
                rf"(?P<lead>,\s)(?P<state>{'|'.join(_STATES)})"
                r"(?:(?P<between>,?\s)(?P<zip>\d{5}(?:-\d{4})?)\b|(?=\s*(?:[.,;]|$)))"
            ),
            _state_zip,
        ),
        (
            re.compile(
                rf"(?P<time>\b\d{{1,2}}(?::[0-5]\d){{1,2}}(?:\s?[aApP]\.?[mM]\b\.?)?"
                rf"|\b\d{{1,2}}\s?[aApP]\.?[mM]\b\.?)\s+(?P<zone>{_TIME_ZONES})\b"
            ),
            _time_zone,
        ),
        (  # "at 10:30:15" is a time of day (with seconds), not a duration
            re.compile(r"(?<![Aa]t )\b(\d{1,2}):([0-5]\d):([0-5]\d)\b(?!\s?[aApP]\.?[mM]\b)"),
            _duration,
        ),
        (
            re.compile(rf"\b(?P<code>{_CURRENCY_CODES})\s?(?P<amount>{number})(?![\d,.]?\d)"),
            lambda match, language: f"{match.group('amount')} {match.group('code')}",
        ),
        (
            re.compile(r"\b(?=[A-Z0-9-]*[A-Z])(?=[A-Z0-9-]*\d)[A-Z0-9]+(?:-[A-Z0-9]+){2,}\b"),
            _serial,
        ),
        (
            re.compile(r"\b[A-Z0-9]*(?:[A-Z]\d+[A-Z]|\d[A-Z]+\d)[A-Z0-9]*\b"),
            lambda match, language: spell(match.group(0), language),
        ),
        (re.compile(r"\bQ(?P<q>[1-4])\s+(?P<year>1[5-9]\d\d|20\d\d)\b"), _quarter),
        (
            re.compile(
                rf"(?<![\w.,$£€¥₹])(?P<number>[1-9]\d{{0,4}})(?P<letter>[A-Z]?)"
                r"\s+(?P<street>(?:[NSEW]\s+)?(?:(?:[A-Z][a-z]+|\d+(?:st|nd|rd|th))\s+){1,3}"
                rf"{_STREET})(?!\w)"
            ),
            _house_number,
        ),
        (
            re.compile(
                r"\b(?P<decade>1[1-9]\d0|20[0-9]0)'?s\s?[–-]\s?"
                r"(?:(?P<full>1[1-9]\d0|20[0-9]0)|(?P<tens>[1-9]0))'?s\b"
            ),
            _decade_range,
        ),
        (re.compile(r"\b(?P<decade>1[1-9]\d0|20[0-9]0)'?s\b"), _decade),
        (re.compile(r"\b401\(k\)"), lambda match, language: "four oh one k"),
        (
            re.compile(
                r"(?P<lead>['’]|\b(?:mid|early|late)-|\b(?:the|early|late|mid) )"
                r"(?P<tens>[1-9]0)'?s\b"
            ),
            _short_decade,
        ),
        (
            re.compile(
                r"(?<![$£€¥₹\d.,])\b(?P<whole>\d+)\s+(?P<num>\d{1,2})/(?P<den>\d{1,2})\b(?!/)"
            ),
            _mixed_number,
        ),
        (re.compile(r"\b24/7\b"), lambda match, language: "twenty-four seven"),
        (
            re.compile(
                r"(?<![\d/.,])(?P<num>\d{1,5})/(?P<den>\d{1,5})(?:st|nd|rd|th|ST|ND|RD|TH)?"
                r"(?![\d/]|\.\d)"
            ),
            _fraction,
        ),
        (re.compile(r"\bUS\$"), lambda match, language: "$"),
        (re.compile(r"(?<=[$£€¥₹₩])\.(?=\d)"), lambda match, language: "0."),
        (
            re.compile(r"\b(jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.(?=\s?\d)", re.I),
            _month_abbreviation,
        ),
        (re.compile(r"(?<=\d)\s?[–-]\s?(?=[$£€¥₹]\d)"), lambda match, language: " to "),
        (re.compile(rf"(?<=[$£€¥₹])({number})\s?b\b"), lambda m, language: f"{m.group(1)} billion"),
        (re.compile(r"(?<=\d)\s?[x×]\s?(?=\d)"), lambda match, language: " by "),
        (re.compile(r"(?<=\d)\s?\+\s?(?=\d)"), lambda match, language: " plus "),
        (re.compile(r"(?<=\d)\s?=\s?(?=\d)"), lambda match, language: " equals "),
        (
            re.compile(
                rf"(?<![\w.])(?P<amount>{number})\s?(?P<unit>{'|'.join(_ANY_CASE_UNITS)})(?![\w/])",
                re.IGNORECASE,
            ),
            _any_case_unit,
        ),
    ]


@cache
def words() -> list[Rule]:
    """Rules for texts with or without figures."""
    return [
        (re.compile(rf"\b(?P<name>{_REGNAL})\s+(?P<numeral>{_ROMAN})\b"), _regnal),
        (re.compile(rf"\b(?P<cue>{_CHAPTER})\s+(?P<numeral>{_ROMAN})\b"), _chapter),
    ]


@cache
def after() -> list[Rule]:
    money = r"dollars?|pounds?|euros?|yen|won|cents?|pence|rupees?|francs?"
    return [
        (re.compile(r"(?<=\b[AP]M)\s?[–-]\s?(?=\w)"), lambda match, language: " to "),
        (
            re.compile(rf"\b(?P<money>{money})\s?/\s?(?P<per>{'|'.join(_PER)})\b", re.IGNORECASE),
            _per,
        ),
    ]
