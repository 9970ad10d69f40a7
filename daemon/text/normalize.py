"""Written forms read out in the voice's language: the whole text (English rules, or the
multilingual ones), or one SSML `say-as` span interpreted as its author says."""

from __future__ import annotations

import datetime
import re

from daemon.errors import TextError
from daemon.text import english, japanese, multilingual, numbers

INTERPRETATIONS = (
    "characters",
    "spell-out",
    "digits",
    "cardinal",
    "number",
    "ordinal",
    "date",
    "time",
    "telephone",
    "currency",
)
DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "y", "m", "d")


def is_english(language: str) -> bool:
    return language == "en" or language.startswith(("en_", "en-"))


def normalize(text: str, language: str) -> str:
    if is_english(language):
        return english.normalize(text, language.replace("-", "_"))
    return multilingual.normalize(text, language)


def _integer(text: str, kind: str) -> int:
    digits = text.replace(",", "").strip()
    if not digits.isdigit():
        raise TextError(f"say-as {kind}: {text!r} is not a whole number")
    return int(digits)


def _spelled(text: str, language: str) -> str:
    if is_english(language):
        return english.spell(text, language)
    if japanese.is_japanese(language):
        return japanese.spelled(text)
    said = []
    for character in text:
        if character.isdigit() and numbers.supported(language):
            said.append(numbers.digits(character, language))
        elif character.isalnum():
            said.append(character.upper())
    return " ".join(said)


def _date(text: str, form: str | None, language: str) -> str:
    fields = re.findall(r"\d+", text)
    form = form or ("ymd" if re.fullmatch(r"\s*\d{4}-\d{1,2}-\d{1,2}\s*", text) else "mdy")
    if form not in DATE_FORMATS:
        raise TextError(f"say-as date: format {form!r} is not one of {', '.join(DATE_FORMATS)}")
    if len(fields) != len(form):
        raise TextError(f"say-as date: {text!r} does not have the fields of format {form!r}")
    values = dict(zip(form, (int(field) for field in fields), strict=True))
    year, month, day = values.get("y"), values.get("m"), values.get("d")
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        raise TextError(f"say-as date: {text!r} is not a date in format {form!r}")
    if not is_english(language):
        from babel.dates import format_date

        if None in (year, month, day):
            raise TextError(f"say-as date: format {form!r} needs y, m and d in {language}")
        assert year is not None and month is not None and day is not None
        return normalize(
            format_date(datetime.date(year, month, day), "long", locale=language), language
        )
    said = []
    if month is not None:
        said.append(english.MONTHS[month - 1])
    if day is not None:
        said.append(numbers.ordinal(day, language))
    if year is not None:
        said.append(("," if said else "") + " " + numbers.year(year, language))
    return " ".join(said).replace(" ,", ",").strip()


def _time(text: str, language: str) -> str:
    found = re.fullmatch(r"\s*(\d{1,2})(?:[:.h](\d{2}))?\s*([aApP]\.?[mM]\.?)?\s*", text)
    if found is None:
        raise TextError(f"say-as time: {text!r} is not a time (like 10:45, 8:00 am or 21:30)")
    hours, minutes = int(found.group(1)), int(found.group(2) or 0)
    meridiem = found.group(3) and ("AM" if found.group(3)[0].lower() == "a" else "PM")
    if hours > 23 or minutes > 59 or (meridiem and not 1 <= hours <= 12):
        raise TextError(f"say-as time: {text!r} is not a time of day")
    if japanese.is_japanese(language):
        if meridiem is not None:  # 12 am is midnight, 12 pm noon
            hours = hours % 12 + (12 if meridiem == "PM" else 0)
        return normalize(f"{hours}時" + (f"{minutes}分" if minutes else ""), language)
    if not is_english(language):
        return text
    return english.clock(hours, minutes, meridiem, language)


def _telephone(text: str, language: str) -> str:
    groups = re.findall(r"\d+", text)
    if not groups:
        raise TextError(f"say-as telephone: {text!r} holds no digits")
    if japanese.is_japanese(language):
        return "、".join(japanese.spelled(group) for group in groups)
    said = [numbers.digits(group, language) for group in groups]
    if text.strip().startswith("+"):
        said[0] = f"{'plus' if is_english(language) else '+'} {said[0]}"
    return ", ".join(said)


def say_as(text: str, interpret_as: str, form: str | None, language: str) -> str:
    """One `say-as` span in words; a value that does not fit its interpretation is an error."""
    if interpret_as in ("characters", "spell-out"):
        return _spelled(text, language)
    if interpret_as == "digits":
        if not re.search(r"\d", text):
            raise TextError(f"say-as digits: {text!r} holds no digits")
        if japanese.is_japanese(language):
            return japanese.spelled("".join(re.findall(r"\d", text)))
        return numbers.digits(text, language)
    if interpret_as in ("cardinal", "number"):
        if not re.fullmatch(r"\s*-?[\d,]+(?:\.\d+)?\s*", text):
            raise TextError(f"say-as {interpret_as}: {text!r} is not a number")
        if japanese.is_japanese(language):  # its reader's own reading of the number
            return normalize(text.strip(), language)
        return numbers.cardinal(text.strip(), language)
    if interpret_as == "ordinal":
        return numbers.ordinal(
            _integer(re.sub(r"(?<=\d)(st|nd|rd|th)$", "", text.strip()), "ordinal"), language
        )
    if interpret_as == "date":
        return _date(text, form, language)
    if interpret_as == "time":
        return _time(text, language)
    if interpret_as == "telephone":
        return _telephone(text, language)
    if interpret_as == "currency":
        said = normalize(text.strip(), language)
        if re.search(r"\d", said):
            raise TextError(f"say-as currency: {text!r} is not an amount of money")
        return said
    raise TextError(
        f"say-as interpret-as={interpret_as!r} is not supported "
        f"(supported: {', '.join(INTERPRETATIONS)})"
    )
