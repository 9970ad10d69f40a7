"""How many rows of the announcement corpus each language and class reads right, so that the
next gap is visible: the corpus is tests/data/announcements.tsv (written forms from
announcements, timetables, receipts and addresses, each row's reading reviewed by hand; a
Japanese row gives each number's reading in katakana, as an announcer says it).

Run: .venv/bin/python tools/normalization_report.py [--failures] [--corpus FILE]
A corpus of your own takes the same four tab-separated columns: language, class, written, spoken.
`--nemo DIR` reads NVIDIA NeMo's English test cases instead (DIR: a checkout's
tests/nemo_text_processing/en/data_text_normalization, files `test_cases_CLASS.txt` of
`written~spoken` lines), compared leniently: case, punctuation, hyphens and the words "and",
"the", "of", "a" are not counted, since either way reads the same aloud.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from daemon.text.japanese import hiragana, is_japanese  # noqa: E402
from daemon.text.normalize import normalize  # noqa: E402

CORPUS = REPO / "tests" / "data" / "announcements.tsv"


def rows(path: Path) -> list[tuple[str, str, str, str]]:
    """(language, class, written, spoken) rows; comments and blank lines skipped."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        language, kind, written, spoken = line.split("\t")
        found.append((language, kind, written, spoken))
    return found


def nemo_rows(directory: Path) -> list[tuple[str, str, str, str]]:
    """NeMo's English cases as (language, class, written, spoken) rows."""
    found = []
    for path in sorted(directory.glob("test_cases_*.txt")):
        kind = path.stem.removeprefix("test_cases_")
        for line in path.read_text(encoding="utf-8").splitlines():
            if "~" in line:
                written, spoken = line.split("~", 1)
                found.append(("en_US", kind, written, spoken))
    return found


def reads_as(said: str, spoken: str, language: str) -> bool:
    """Whether the normalised text `said` is the reading `spoken`. Japanese rows give the
    reading of each number in katakana beside the words kept as written; they are compared as
    kana (katakana as hiragana, a long-vowel mark as its vowel, spaces left out), so that
    ジュー and じゅう, which the G2P reads alike, are one."""
    if not is_japanese(language):
        return said == spoken
    return _kana_key(said) == _kana_key(spoken)


def _kana_key(text: str) -> str:
    return hiragana(re.sub(r"\s+", "", text))


def lenient(text: str) -> str:
    text = re.sub(r"[^\w\s]", " ", text.lower().replace("-", " ").replace("'", ""))
    return " ".join(word for word in text.split() if word not in ("and", "the", "of", "a"))


def report(cases: list[tuple[str, str, str, str]], show_failures: bool, exact: bool) -> int:
    right: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    failures = []
    for language, kind, written, spoken in cases:
        said = normalize(written, language)
        total[language, kind] += 1
        if reads_as(said, spoken, language) or (not exact and lenient(said) == lenient(spoken)):
            right[language, kind] += 1
        else:
            failures.append((language, kind, written, spoken, said))
    for language, kind in sorted(total):
        print(f"{language:6} {kind:16} {right[language, kind]:4}/{total[language, kind]:<4}")
    print(f"{'all':23} {sum(right.values()):4}/{sum(total.values())}")
    if show_failures:
        for language, kind, written, spoken, said in failures:
            print(f"\n{language} {kind}: {written!r}\n  wanted {spoken!r}\n  said   {said!r}")
    return 0 if not failures else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--nemo", type=Path, help="NeMo's English test cases (a directory)")
    parser.add_argument("--failures", action="store_true", help="list each row read wrong")
    args = parser.parse_args()
    if args.nemo is not None:
        return report(nemo_rows(args.nemo), args.failures, exact=False)
    return report(rows(args.corpus), args.failures, exact=True)


if __name__ == "__main__":
    sys.exit(main())
