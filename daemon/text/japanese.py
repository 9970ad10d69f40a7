"""Japanese announcements: the written forms that pyopenjtalk (the Kokoro voices' reader)
misreads, rewritten into the ones it reads as an announcer says them. Its dictionary already
reads numbers with their counters (3番線, 8両編成, 1,500円, 14時30分, 12月24日); it reads
14:30 as two numbers, 2026/12/24 as three, and leaves ¥ unread. So: 14:30 → 14時30分
(14:00 → 14時); 2026/12/24, 2026-12-24 and 2026.12.24 → 2026年12月24日; 12/24 or 12/5 →
12月24日, 12月5日, but a proper fraction is one (1/2 → 2分の1); ¥1,500 → 1,500円."""

from __future__ import annotations

import re

_DATE = re.compile(
    r"(?<![\d/.\-])(\d{4})([/.\-])(1[0-2]|0?[1-9])\2(3[01]|[12]\d|0?[1-9])(?![\d/.\-])"
)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_MONTH_DAY = re.compile(r"(?<![\d/])(1[0-2]|0?[1-9])/(3[01]|[12]\d|0?[1-9])(?![\d/])")
_YEN = re.compile(r"[¥￥]\s?(\d[\d,]*)")


def normalize(text: str) -> str:
    text = _DATE.sub(lambda m: f"{int(m[1])}年{int(m[3])}月{int(m[4])}日", text)
    text = _TIME.sub(_clock, text)
    text = _YEN.sub(r"\1円", text)
    return _MONTH_DAY.sub(_month_day, text)


def _clock(match: re.Match[str]) -> str:
    hours, minutes = int(match[1]), int(match[2])
    return f"{hours}時" if minutes == 0 else f"{hours}時{minutes}分"


def _month_day(match: re.Match[str]) -> str:
    month, day = int(match[1]), int(match[2])
    if month < day <= 12:  # 1/2, 3/4: a fraction, read denominator first
        return f"{day}分の{month}"
    return f"{month}月{day}日"
