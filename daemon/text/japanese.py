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
it, what the front end leaves unread: a minus sign (-3℃), a range (10〜15分: "kara"), a phone
number (digit by digit, a pause between its groups); after it, 8分 as happun."""

from __future__ import annotations

import re
import threading

_DATE = re.compile(
    r"(?<![\d/.\-])(\d{4})([/.\-])(1[0-2]|0?[1-9])\2(3[01]|[12]\d|0?[1-9])(?![\d/.\-])"
)
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_MONTH_DAY = re.compile(r"(?<![\d/])(1[0-2]|0?[1-9])/(3[01]|[12]\d|0?[1-9])(?![\d/])")
_YEN = re.compile(r"[¥￥]\s?(\d[\d,]*)")
_MINUS = re.compile(r"(?<![0-9A-Za-z０-９Ａ-Ｚａ-ｚ.,])[-−－‐](?=[0-9０-９])")
_RANGE = re.compile(r"(?<=[0-9０-９時分日月年円人%％])\s*[〜～~]\s*(?=[0-9０-９])")
_PHONE = re.compile(r"(?<![\d-])(0\d{1,4})[-－]\s?(\d{1,4})[-－]\s?(\d{3,4})(?![\d-])")
_DIGIT = re.compile(r"[0-9０-９]")
_DIGIT_GROUPS = re.compile(r"(?<=\d)[,，](?=\d{3}(?!\d))")  # 1,500円: one number
# Each digit of a phone number as announcers say it (2 and 5 long, 4 yon, 7 nana, 9 kyū), in
# katakana: digit names are read as they are written.
DIGIT_NAMES = dict(zip("0123456789", "ゼロ イチ ニー サン ヨン ゴー ロク ナナ ハチ キュー".split()))  # noqa: B905, SIM905
# Latin letters inside Japanese as they are said (JR: jei āru), for abbreviations (2 to 5
# capitals: ATM, NHK); a few words said otherwise.
LETTERS = dict(
    zip(  # noqa: B905
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "エー ビー シー ディー イー エフ ジー エイチ アイ ジェイ ケー エル エム エヌ オー ピー "  # noqa: SIM905
        "キュー アール エス ティー ユー ブイ ダブリュー エックス ワイ ゼット".split(),
    )
)
WORDS = {"Wi-Fi": "ワイファイ", "WiFi": "ワイファイ"}
_ABBREVIATION = re.compile(r"(?<![A-Za-z])[A-Z]{2,5}(?![A-Za-z])")
_FULLWIDTH_LATIN = {
    code: code - 0xFEE0
    for first, last in ("ＡＺ", "ａｚ")
    for code in range(ord(first), ord(last) + 1)
}
# The front end's stretch of a number: its numerals, counters and the symbols read with them.
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


def normalize(text: str) -> str:
    text = _DATE.sub(lambda m: f"{int(m[1])}年{int(m[3])}月{int(m[4])}日", text)
    text = _TIME.sub(_clock, text)
    text = _YEN.sub(r"\1円", text)
    text = _MONTH_DAY.sub(_month_day, text)
    text = _PHONE.sub(_phone, text)
    text = _MINUS.sub("マイナス", text)
    text = _RANGE.sub("から", text)
    text = text.translate(_FULLWIDTH_LATIN)
    for written, said in WORDS.items():
        text = text.replace(written, f" {said} ")
    text = _ABBREVIATION.sub(lambda m: " " + "".join(LETTERS[c] for c in m[0]) + " ", text)
    return read_numbers(text)


def read_numbers(text: str) -> str:
    """`text` with each number, and the counter or unit it belongs to, as pyopenjtalk's front
    end reads it in its sentence (hiragana); unchanged without digits or without pyopenjtalk
    (the `kokoro` extra: a box without it has no Japanese voice)."""
    if not _DIGIT.search(text):
        return text
    try:
        import pyopenjtalk
    except ImportError:
        return text
    with READING_LOCK:
        nodes = pyopenjtalk.run_frontend(_DIGIT_GROUPS.sub("", text))
    pieces: list[tuple[bool, str]] = []  # (a number's reading, text)
    in_number = False
    for node in nodes:
        written, reading = node["string"], node["pron"].replace("’", "")
        numeric = node["pos_group1"] == "数" or any(c in _NUMERAL or c.isdigit() for c in written)
        # A counter (時, 分), or what ends the number's word (時間's 間)
        counter = in_number and (node["pos_group2"] == "助数詞" or node["pos_group1"] == "接尾")
        in_number = node["pos"] == "名詞" and (numeric or counter)
        if in_number and pieces and pieces[-1][0]:
            pieces[-1] = (True, _joined(pieces[-1][1], reading))
        else:
            pieces.append((in_number, reading if in_number else written))
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
        DIGIT_NAMES.get(c) or LETTERS.get(c.upper()) or c for c in text.translate(_FULLWIDTH_LATIN)
    )


def _clock(match: re.Match[str]) -> str:
    hours, minutes = int(match[1]), int(match[2])
    return f"{hours}時" if minutes == 0 else f"{hours}時{minutes}分"


def _month_day(match: re.Match[str]) -> str:
    month, day = int(match[1]), int(match[2])
    if month < day <= 12:  # 1/2, 3/4: a fraction, read denominator first
        return f"{day}分の{month}"
    return f"{month}月{day}日"
