"""Announcements in languages other than English: dates (with and without a year), clock
times, money (symbols, codes, and the currency written as a word), marked ordinals and German
ordinals that agree with their article, ranges, percentages, temperatures and units, and every
other number, all in words through num2words and Babel (CLDR's month names and number
symbols), so that `fastvoice text` and captions show what is said. What a language needs and
the libraries lack is written once, in the tables below."""

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
    return rf"[1-9]\d{{0,2}}(?:[{group_class}]\d{{3}})+(?!\d){cents}|\d+{cents}"


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
# A German ordinal's ending after the word before it: "-en" after these (dative, accusative
# after den, genitive: "am ersten Mai", "den zweiten Versuch"), "-e" after der/die/das ("der
# erste Mai"), "-er" with no article ("1. Mai" alone: "erster Mai").
_GERMAN_EN = re.compile(r"\b(?:am|vom|zum|zur|beim|dem|den|des|im|bis|ab|seit|ins)\s+$", re.I)
_GERMAN_E = re.compile(r"\b(?:der|die|das)\s+$", re.I)
# Words after which "2." is an ordinal before its noun ("der 2. Versuch"), not a sentence end.
_GERMAN_ORDINAL_CUE = (
    r"(?:[Dd]er|[Dd]ie|[Dd]as|[Dd]em|[Dd]en|[Dd]es|[Aa]m|[Ii]m|[Zz]um|[Zz]ur|[Vv]om|[Bb]eim)"
)
# Per language: the word between the two ends of a range, percent, degrees, and units as said
# after a number other than one (those a num2words language does not name are left as written).
_RANGE = {"de": "bis", "fr": "à", "es": "a", "it": "a", "nl": "tot", "pt": "a"}
_PERCENT = {
    "de": "Prozent", "fr": "pour cent", "es": "por ciento", "it": "per cento",
    "nl": "procent", "pt": "por cento",
}  # fmt: skip
_DEGREES = {
    "de": ("Grad", "Grad"), "fr": ("degré", "degrés"), "es": ("grado", "grados"),
    "it": ("grado", "gradi"), "nl": ("graad", "graden"), "pt": ("grau", "graus"),
}  # fmt: skip
_UNITS = {
    "de": {
        "km/h": "Kilometer pro Stunde", "km": "Kilometer", "m": "Meter", "cm": "Zentimeter",
        "kg": "Kilogramm", "g": "Gramm", "l": "Liter", "min": "Minuten", "Min.": "Minuten",
        "h": "Stunden", "Std.": "Stunden",
    },
    "fr": {
        "km/h": "kilomètres par heure", "km": "kilomètres", "m": "mètres", "cm": "centimètres",
        "kg": "kilos", "g": "grammes", "l": "litres", "min": "minutes", "h": "heures",
    },
    "es": {
        "km/h": "kilómetros por hora", "km": "kilómetros", "m": "metros", "cm": "centímetros",
        "kg": "kilos", "g": "gramos", "l": "litros", "min": "minutos", "h": "horas",
    },
    "it": {
        "km/h": "chilometri orari", "km": "chilometri", "m": "metri", "cm": "centimetri",
        "kg": "chili", "g": "grammi", "l": "litri", "min": "minuti",
    },
    "nl": {
        "km/h": "kilometer per uur", "km": "kilometer", "m": "meter", "cm": "centimeter",
        "kg": "kilo", "g": "gram", "l": "liter", "min": "minuten",
    },
    "pt": {
        "km/h": "quilómetros por hora", "km": "quilómetros", "m": "metros",
        "cm": "centímetros", "kg": "quilos", "g": "gramas", "l": "litros", "min": "minutos",
    },
}  # fmt: skip
# The currency written as a word after the amount ("5 Euro", "10 euros", "3 dólares"): read by
# the plain-number rule, the word as written.
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
    """ "dritten" after am/vom/den, "dritte" after der/die/das, else "dritter"."""
    stem = numbers.ordinal(day, "de")  # "dritte"
    if _GERMAN_EN.search(before):
        return stem + "n"
    return stem if _GERMAN_E.search(before) else stem + "r"


def _german_ordinals(text: str) -> str:
    """ "am 7.12." (a day and a month, no year): "am siebten Dezember"; "der 2. Versuch": "der
    zweite Versuch" (after an article or a contracted preposition, "2." before a noun is an
    ordinal, not a sentence end)."""

    def day_month(match: re.Match[str]) -> str:
        day, month = int(match.group("day")), int(match.group("month"))
        if not 1 <= day <= 31:
            return match.group(0)
        end = "." if not text[match.end() :].strip() else ""  # the date's dot ends the text
        said = _german_ordinal(day, text[: match.start()])
        return f"{said} {_wide_month(month, 'de')}{end}"

    text = re.sub(
        r"(?<![\d.])(?P<day>[12]?\d|3[01])\.(?P<month>1[0-2]|0?[1-9])\.(?!\d)", day_month, text
    )
    # "vom 3. bis 5. Oktober": the first day of a range, its month said once, after the second.
    text = re.sub(
        r"(?<![\d.])(?P<day>[12]?\d|3[01])\.(?=\s+(?:bis|und)\s+\w+(?:te[nr]?)\s)",
        lambda m: _german_ordinal(int(m.group("day")), text[: m.start()]),
        text,
    )
    pattern = re.compile(
        rf"(?P<cue>\b{_GERMAN_ORDINAL_CUE}\s+)(?P<number>\d{{1,3}})\.\s+(?=[A-ZÄÖÜ][a-zäöüß])"
    )
    return pattern.sub(
        lambda m: f"{m.group('cue')}{_german_ordinal(int(m.group('number')), m.group('cue'))} ",
        text,
    )


def _amounts(text: str, language: str) -> str:
    """Ranges, percentages, temperatures, units, scores, versions, then every other number, in
    words (in the languages of the tables above; the others' are left to espeak-ng)."""
    if language.split("_")[0] not in _RANGE:
        return text
    reader = _NumberReader(language)
    return reader.plain(reader.versions(reader.measures(text)))


class _NumberReader:
    """Numbers as a language writes them (its decimal mark and digit groups), read in words."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.base = language.split("_")[0]
        self.decimal, self.group = _symbols(language)
        group_class = re.escape(self.group) + (r"\s" if self.group.isspace() else "")
        decimals = rf"(?:{re.escape(self.decimal)}\d+)?"
        self.number = rf"[1-9]\d{{0,2}}(?:[{group_class}]\d{{3}})+(?!\d){decimals}|\d+{decimals}"

    def said(self, written: str) -> str:
        words = numbers.cardinal(_plain_amount(written, self.language), self.language)
        if self.decimal in written and self.base in _DECIMAL_COMMA:  # "tres coma cinco"
            point = numbers.cardinal("0.5", self.language).split()[-2]
            words = words.replace(f" {point} ", f" {_DECIMAL_COMMA[self.base]} ")
        return words

    def measures(self, text: str) -> str:
        """Ranges, percentages, temperatures and units."""
        base, number, said = self.base, self.number, self.said
        text = re.sub(
            rf"(?<![\w.,])({number})\s?[–-]\s?({number})(?![\w]|[.,]\d)",
            lambda m: f"{said(m.group(1))} {_RANGE[base]} {said(m.group(2))}",
            text,
        )
        text = re.sub(
            rf"(?<![\w.,])({number})\s?%", lambda m: f"{said(m.group(1))} {_PERCENT[base]}", text
        )
        degree_sign = rf"(?<![\w.,])([-−])?({number})\s?[°º](?:\s?([CFcf])(?![a-z]))?"
        text = re.sub(degree_sign, self._degrees, text)
        units = _UNITS[base]
        alternatives = "|".join(map(re.escape, sorted(units, key=len, reverse=True)))
        return re.sub(
            rf"(?<![\w.,])({number})\s?({alternatives})(?![\w/])",
            lambda m: f"{said(m.group(1))} {units[m.group(2)]}",
            text,
        )

    def _degrees(self, match: re.Match[str]) -> str:
        one, many = _DEGREES[self.base]
        scale = {"C": " Celsius", "F": " Fahrenheit"}.get((match.group(3) or "").upper(), "")
        minus = "minus " if match.group(1) else ""
        amount = match.group(2)
        return f"{minus}{self.said(amount)} {one if amount == '1' else many}{scale}"

    def versions(self, text: str) -> str:
        """Scores ("12:75", not a clock time) and version numbers ("3.2", "1.2.3")."""
        text = re.sub(
            r"(?<![\w.,:])(\d+):(\d+)(?![\d:])",
            lambda m: f"{self.said(m.group(1))} {_SCORE[self.base]} {self.said(m.group(2))}",
            text,
        )
        return re.sub(
            r"(?<![\w.,])(\d+)((?:\.\d+)+)(?!\w|[.,]\d)",
            lambda m: m.group(0) if _grouped(m.group(0), self.group) else self._version(m),
            text,
        )

    def _version(self, match: re.Match[str]) -> str:
        dot = f" {_DOT[self.base]} "
        return dot.join(numbers.cardinal(part, self.language) for part in match.group(0).split("."))

    def plain(self, text: str) -> str:
        """Every other number; a dialled or keyed one ("030 1234567") digit by digit."""

        def spoken(match: re.Match[str]) -> str:
            written = match.group(0)
            if re.fullmatch(r"0\d+|\d{7,}", written):
                return numbers.digits(written, self.language)
            return _counted(self.said(written), text[match.end() :], self.base)

        return re.sub(rf"(?<![\w.,])[-−]?(?:{self.number})(?![\d]|[.,]\d)", spoken, text)


# A decimal comma as said where num2words says "point"; a score's colon ("12:75").
_DECIMAL_COMMA = {"es": "coma", "it": "virgola", "pt": "vírgula", "nl": "komma"}
_SCORE = {"de": "zu", "fr": "à", "es": "a", "it": "a", "nl": "tegen", "pt": "a"}
# The dot of a version number ("Version 3.2") as said.
_DOT = {"de": "Punkt", "fr": "point", "es": "punto", "it": "punto", "nl": "punt", "pt": "ponto"}


def _grouped(written: str, group: str) -> bool:
    """ "5.000" in German: thousands, not a version."""
    return group == "." and re.fullmatch(r"\d{1,3}(?:\.\d{3})+", written) is not None


# "One" before a noun, by the noun's likely gender (its ending): German "eine Minute", "ein
# Zug"; Spanish and Italian "una hora", "un minuto".
_ONE_BEFORE_NOUN = {
    "de": ("eins", "eine", "ein", r"(?:e|ung|heit|keit|ion|tät|schaft|ik)"),
    "es": ("uno", "una", "un", r"a"),
    "it": ("uno", "una", "un", r"a"),
}


# Words after "1" that are no noun it counts ("el 1 de mayo", "1 e 2").
_NOT_NOUNS = {"de", "del", "y", "e", "o", "a", "al", "en", "di", "per", "con", "por", "para"}


def _counted(said: str, after: str, base: str) -> str:
    """A number's words as said before what follows it ("eine Minute", not "eins Minute")."""
    rule = _ONE_BEFORE_NOUN.get(base)
    if rule is None or said != rule[0]:
        return said
    noun = re.match(r"\s+([^\W\d_]+)", after)
    if noun is None or noun.group(1).lower() in _NOT_NOUNS:
        return said
    if base == "de" and not noun.group(1)[0].isupper():
        return said
    _, feminine, plain, ending = rule
    return feminine if re.search(rf"{ending}$", noun.group(1)) else plain


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
    if japanese.is_japanese(language):  # its reader has its own numbers and counters
        return japanese.normalize(text)
    text = _ISO_DATE.sub(lambda match: _date(match, language), text)
    if not numbers.supported(language):
        return text
    text = _NUMERIC_DATE.sub(lambda match: _numeric_date(match, text, language), text)
    if language.split("_")[0] == "de":
        text = _german_day_month(text)
        text = _german_ordinals(text)
    text = _clock_times(text, language)
    amount = _amount_pattern(language)
    symbols = "|".join(re.escape(symbol) for symbol in _SYMBOLS)
    text = re.sub(
        # An amount after its symbol does not take digit groups of an amount whose symbol
        # follows it ("€1 100 €": one euro, a hundred euros; "€0 €0": two amounts).
        rf"(?P<symbol>{symbols})\s?(?P<amount>{amount})(?!\s?(?:{symbols})(?!\s?\d))"
        rf"|(?<![\w.,])(?P<amount2>{amount})\s?"
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
    return _amounts(text, language)
