"""English short forms read as words: titles and abbreviations (Mr., St. as Saint or Street,
Dr. as Doctor or Drive, etc.), and whether the dot a form took also ended its sentence."""

from __future__ import annotations

import re
from functools import cache, partial

from daemon.text.english_forms import Rule

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


def ends_sentence(match: re.Match[str]) -> bool:
    """Whether the dot a match took was also the end of its sentence."""
    rest = match.string[match.end() :]
    return match.group(0).endswith(".") and (not rest.strip() or bool(re.match(r"\s+[A-Z]", rest)))


def stop(match: re.Match[str]) -> str:
    return "." if ends_sentence(match) else ""


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
    return "Street" + stop(match)


def _doctor_or_drive(match: re.Match[str], language: str) -> str:
    if _capitalised_word_after(match) and not _capitalised_word_before(match):
        return "Doctor"
    return "Drive" + stop(match)


def _abbreviation(expansion: str, title: bool, match: re.Match[str], language: str) -> str:
    return expansion if title else expansion + stop(match)


@cache
def rules() -> list[Rule]:
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
