"""Japanese announcements: the written forms that pyopenjtalk (the Kokoro voices' reader)
misreads, rewritten into the ones it reads as an announcer says them. Its dictionary already
reads numbers with their counters (3番線, 8両編成, 1,500円, 14時30分, 12月24日); it reads
14:30 as two numbers, 2026/12/24 as three, and leaves ¥ unread. So: 14:30 → 14時30分
(14:00 → 14時); 2026/12/24, 2026-12-24 and 2026.12.24 → 2026年12月24日; 12/24 or 12/5 →
12月24日, 12月5日, but a proper fraction is one (1/2 → 2分の1); ¥1,500 → 1,500円.

Then the numbers themselves: the Kokoro voices' G2P (misaki's rules over the dictionary's words)
reads each digit run apart from its counter (12月 as "jūni tsuki", 9時 as "kyūji", 20日 as
"nijū bi"), while pyopenjtalk's front end (its NJD stage) reads them as an announcer does, in
their sentence (12月1日 tsuitachi, 9時 ku-ji, 3階 sangai, 2人 futari, 15分 jūgofun, 3.5% san ten
go pāsento). So every number, with the counter or unit it belongs to, is written as the front
end reads it, in hiragana (katakana would be looked up again as a word: ハツカ as ハッカ). Before
it, what the front end leaves unread: a minus sign (-3℃), a range (10〜15分, 10時-18時: "kara"),
a phone number (digit by digit, a pause between its groups); after it, what it reads otherwise
than announcers do (8分 happun, 0時 reiji, 20歳 hatachi, 1000万 issenman)."""

from __future__ import annotations

import re
import threading

_DATE = re.compile(
    r"(?<![\d/.\-])(\d{4})([/.\-])(1[0-2]|0?[1-9])\2(3[01]|[12]\d|0?[1-9])(?![\d/.\-])"
)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_MONTH_DAY = re.compile(r"(?<![\d/])(1[0-2]|0?[1-9])/(3[01]|[12]\d|0?[1-9])(?![\d/])")
_YEN = re.compile(r"[¥￥]\s?(\d[\d,]*)")
_COUNTED = "時分日月年円人%％"  # what a number before a range's dash may end with
# A range: 10〜15分, 10時-18時 (a time's 10:00-18:00 is 10時-18時 by then), 10-15分.
_RANGE = re.compile(
    rf"(?<=[0-9{_COUNTED}])\s*[〜～~]\s*(?=[0-9])"
    rf"|(?<=[{_COUNTED}])\s*[-‐–−－]\s*(?=[0-9])"
    rf"|(?<=[0-9])[-‐–−－](?=[0-9]+[{_COUNTED}])"
)
# A minus sign: a dash before a number that follows no number, letter or counter (-3℃).
_MINUS = re.compile(rf"(?<![0-9A-Za-z.,{_COUNTED}])[-−－‐](?=[0-9])")
_PHONE = re.compile(r"(?<![\d-])(0\d{1,4})[-－]\s?(\d{1,4})[-－]\s?(\d{3,4})(?![\d-])")
_DIGIT = re.compile(r"[0-9０-９]")
DIGIT_GROUPS = re.compile(r"(?<=\d)[,，](?=\d{3}(?!\d))")  # 1,500円: one number
# What the front end reads at once: a stretch of text without spaces, a comma (、) or a
# sentence's end (the words around a number are its context; "5 10" stays two numbers).
_STRETCH = re.compile(r"[^\s、。！？!?]+")
# Full-width digits and Latin letters as ASCII (the rules above match those), and back for
# what the front end gives in full width.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF10, 0xFF5B) if chr(code).isalnum()}
_ASCII = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
# Each digit of a phone number as announcers say it (2 and 5 long, 4 yon, 7 nana, 9 kyū), in
# katakana: digit names are read as they are written.
DIGIT_NAMES = dict(zip("0123456789", "ゼロ イチ ニー サン ヨン ゴー ロク ナナ ハチ キュー".split()))  # noqa: B905, SIM905
# Latin letters as they are said in Japanese (say-as characters: JR jei āru). Abbreviations
# in running text are left to the G2P, which reads them so itself (JR, ATM, NHK, Wi-Fi).
LETTERS = dict(
    zip(  # noqa: B905
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "エー ビー シー ディー イー エフ ジー エイチ アイ ジェイ ケー エル エム エヌ オー ピー "  # noqa: SIM905
        "キュー アール エス ティー ユー ブイ ダブリュー エックス ワイ ゼット".split(),
    )
)
# The numerals the front end writes a number's words with (1人: 一人, 24日: 二十 四日).
_NUMERAL = "〇一二三四五六七八九十百千万億兆"
# Each hiragana's vowel (small kana: the vowel they end a mora with).
_VOWEL_OF = {
    kana: vowel
    for vowel, row in (
        ("あ", "あかがさざただなはばぱまやらわぁゃ"),
        ("い", "いきぎしじちぢにひびぴみりぃ"),
        ("う", "うくぐすずつづぬふぶぷむゆるぅゅ"),
        ("え", "えけげせぜてでねへべぺめれぇ"),
        ("お", "おこごそぞとどのほぼぽもよろをぉょ"),
    )
    for kana in row
}
# pyopenjtalk's front end is one instance per process: one reading at a time (its users, the
# Kokoro voices among them, hold this lock too).
READING_LOCK = threading.Lock()


def is_japanese(language: str) -> bool:
    """`ja`, `ja_JP` and `ja-JP` alike."""
    return language.replace("-", "_").split("_")[0].lower() == "ja"


def normalize(text: str) -> str:
    text = text.translate(_FULL_WIDTH)
    text = _DATE.sub(lambda m: f"{int(m[1])}年{int(m[3])}月{int(m[4])}日", text)
    text = _TIME.sub(_clock, text)
    text = _YEN.sub(r"\1円", text)
    text = _MONTH_DAY.sub(_month_day, text)
    text = _PHONE.sub(_phone, text)
    text = _RANGE.sub("から", text)
    text = _MINUS.sub("マイナス", text)
    return read_numbers(text)


def read_numbers(text: str) -> str:
    """`text` with each number, and the counter or unit it belongs to, as pyopenjtalk's front
    end reads it among the words around it (hiragana); the rest as written. Unchanged without
    pyopenjtalk (the `kokoro` extra: a box without it has no Japanese voice)."""
    if not _DIGIT.search(text):
        return text
    try:
        import pyopenjtalk
    except ImportError:
        return text

    def stretch(match: re.Match[str]) -> str:
        written = match[0]
        if not _DIGIT.search(written):
            return written
        try:
            with READING_LOCK:
                nodes = pyopenjtalk.run_frontend(DIGIT_GROUPS.sub("", written))
        except RuntimeError:  # longer than the front end takes: read by the G2P as it is
            return written
        return _with_readings(nodes, written)

    return _STRETCH.sub(stretch, text)


def _with_readings(nodes: list[dict], original: str) -> str:
    """The front end's words of `original`, each run of a number and its counters as its
    reading. A word is a number's when the front end says so, or when it holds a digit or a
    numeral it made of digits (1人 becomes the word 一人; 千葉's 千 was written so)."""
    pieces: list[tuple[bool, str]] = []  # (a number's reading, text)
    in_number = False
    for node in nodes:
        written, reading = node["string"], node["pron"].replace("’", "")
        kind = node["pos_group1"]
        made = any(c.isdigit() or (c in _NUMERAL and c not in original) for c in written)
        # A counter (時, 分), or what ends the number's word (時間's 間)
        counter = in_number and (node["pos_group2"] == "助数詞" or kind == "接尾")
        in_number = node["pos"] == "名詞" and (kind == "数" or made or counter)
        if in_number and pieces and pieces[-1][0]:
            pieces[-1] = (True, _joined(pieces[-1][1], reading))
        else:
            pieces.append((in_number, reading if in_number else written.translate(_ASCII)))
    # A reading stands apart (spaces): hiragana after a word would be read as its particle
    # (令和はちねん: "wa chi nen").
    return "".join(f" {hiragana(said)} " if number else said for number, said in pieces).strip()


def _joined(number: str, counter: str) -> str:
    """A number's reading and its counter's, with the changes the front end leaves out."""
    if number.endswith("ハチ") and counter == "フン":  # 8分: happun
        return number[:-1] + "ップン"
    if number == "ゼロ" and counter in ("ジ", "ド"):  # 0時 reiji, 0℃ reido
        return "レー" + counter
    if number == "ニジュッ" and counter == "サイ":  # 20歳 hatachi
        return "ハタチ"
    if number == "セン" and counter in ("マン", "オク"):  # 1000万 issenman
        return "イッセン" + counter
    return number + counter


def hiragana(katakana: str) -> str:
    """The front end's katakana in hiragana, each long-vowel mark as the vowel it lengthens
    (ジュー as じゅう, レー as れい): the G2P splits a word at a mark in hiragana."""
    said: list[str] = []
    for character in katakana:
        if character == "ー" and said:
            vowel = _VOWEL_OF.get(said[-1], "")
            character = {"お": "う", "え": "い"}.get(vowel, vowel) or character
        elif "ァ" <= character <= "ヶ":
            character = chr(ord(character) - 0x60)
        said.append(character)
    return "".join(said)


def _phone(match: re.Match[str]) -> str:
    """Digit by digit, a pause between the groups, apart from the words around it."""
    return f" {'、'.join(spelled(group) for group in match.groups())} "


def spelled(text: str) -> str:
    """Digits and Latin letters one by one, as they are said (SSML say-as characters, digits,
    telephone); anything else as written."""
    return "".join(
        DIGIT_NAMES.get(c) or LETTERS.get(c.upper()) or c for c in text.translate(_FULL_WIDTH)
    )


def _clock(match: re.Match[str]) -> str:
    hours, minutes = int(match[1]), int(match[2])
    return f"{hours}時" if minutes == 0 else f"{hours}時{minutes}分"


def _month_day(match: re.Match[str]) -> str:
    month, day = int(match[1]), int(match[2])
    if month < day <= 12:  # 1/2, 3/4: a fraction, read denominator first
        return f"{day}分の{month}"
    return f"{month}月{day}日"
