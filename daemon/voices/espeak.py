"""espeak-ng through piper-tts's phonemizer, as Piper voices hear their text. espeak-ng keeps
global state (the selected voice): one call at a time per process, behind one lock."""

from __future__ import annotations

import threading
from functools import lru_cache

from daemon.errors import VoiceError

_LOCK = threading.Lock()
_phonemizer = None


def phonemize(language: str, text: str) -> list[list[str]]:
    """Phonemes per sentence, as espeak-ng splits the text (after . ? and !)."""
    global _phonemizer
    from piper.phonemize_espeak import EspeakPhonemizer

    with _LOCK:
        if _phonemizer is None:
            _phonemizer = EspeakPhonemizer()
        return _phonemizer.phonemize(language, text)


@lru_cache(maxsize=8192)
def word_phonemes(language: str, word: str) -> str:
    """A word's phonemes alone, for word timings: words recur, and espeak-ng is asked one at a
    time."""
    return "".join(symbol for sentence in phonemize(language, word) for symbol in sentence)


def check_voice(name: str, language: str) -> None:
    """espeak-ng can speak `language` (a voice's `espeak.voice`); a VoiceError names it."""
    try:
        phonemize(language, "a")
    except RuntimeError as error:
        raise VoiceError(
            f"voice {name!r}: espeak-ng cannot speak its espeak.voice {language!r} ({error})"
        ) from None
