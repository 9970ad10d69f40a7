"""What a Piper voice's graph is fed, from a request and the voice's JSON: espeak-ng's phonemes
(or the text's own letters, or an utterance's phonemes as written) as ids, the speaker's id and
the three scales. The voice (`vits`) runs the graph on them."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from daemon.config import VitsVoiceConfig
from daemon.errors import TextError, VoiceError
from daemon.text.script import Part, Phonemes, Utterance, join_words, split_closing
from daemon.voices import espeak
from daemon.voices.base import SpeechOptions

if TYPE_CHECKING:  # the annotation only: piper-tts is imported where used, as in piper_files
    from piper.config import PiperConfig


class PiperInputs:
    def __init__(self, name: str, config: VitsVoiceConfig, piper: PiperConfig) -> None:
        """`piper`: the voice's JSON as piper-tts reads it; its espeak-ng voice is checked now,
        so that a voice espeak-ng cannot speak fails as it loads, not at its first request."""
        from piper.config import PhonemeType

        self.name = name
        self.config = config
        self.piper = piper
        if piper.phoneme_type == PhonemeType.ESPEAK:
            espeak.check_voice(name, piper.espeak_voice)
        by_id = {index: speaker for speaker, index in piper.speaker_id_map.items()}
        count = piper.num_speakers
        self.speakers = tuple(by_id.get(i, str(i)) for i in range(count)) if count > 1 else ()

    def speaker_id(self, speaker: str | int | None) -> int | None:
        """Speaker name or index → id; None for single-speaker voices."""
        count = self.piper.num_speakers
        if count <= 1:
            if speaker not in (None, 0, "0"):
                raise VoiceError(
                    f"voice {self.name!r} has a single speaker; got speaker {speaker!r}"
                )
            return None
        if speaker is None:
            return self.piper.default_speaker_id
        if isinstance(speaker, str) and speaker in self.piper.speaker_id_map:
            return self.piper.speaker_id_map[speaker]
        if isinstance(speaker, int) or (isinstance(speaker, str) and speaker.isdigit()):
            index = int(speaker)
            if 0 <= index < count:
                return index
        raise VoiceError(
            f"voice {self.name!r}: unknown speaker {speaker!r} "
            f"(names: {', '.join(self.speakers[:10])}{'…' if count > 10 else ''}; "
            f"or an index 0 to {count - 1})"
        )

    def phonemes(self, sentence: str | tuple[Part, ...]) -> list[list[str]]:
        """Phonemes per sentence as espeak-ng splits them; an utterance with phonemes of its
        own is one sentence, its words phonemized around them."""
        parts = (sentence,) if isinstance(sentence, str) else sentence
        if not any(isinstance(part, Phonemes) for part in parts):
            return self._phonemize(join_words(str(part) for part in parts))
        joined: list[str] = []
        for part in parts:
            if isinstance(part, Phonemes):
                closing, words = "", _symbols(part)
            else:
                # The punctuation closing the phonemes before it goes in as their symbols:
                # phonemized alone, espeak-ng drops a full stop and reads "!" as a word.
                closing, rest = split_closing(part)
                words = [symbol for said in self._phonemize(rest) for symbol in said]
            joined.extend(symbol for symbol in closing if symbol in self.piper.phoneme_id_map)
            if joined and words:
                joined.append(" ")
            joined.extend(words)
        return [joined]

    def _phonemize(self, text: str) -> list[list[str]]:
        from piper.config import PhonemeType

        if self.piper.phoneme_type == PhonemeType.TEXT:
            return [list(unicodedata.normalize("NFD", text))]
        return [p for p in espeak.phonemize(self.piper.espeak_voice, text) if p]

    def word_phonemes(self, word: str) -> str:
        """One word's phonemes on its own (an SSML or lexicon `[phonemes]` as they are): what
        word timings match the said phonemes against."""
        from piper.config import PhonemeType

        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
        if self.piper.phoneme_type == PhonemeType.ESPEAK:
            return espeak.word_phonemes(self.piper.espeak_voice, word)
        return "".join(symbol for said in self._phonemize(word) for symbol in said)

    def check_utterance(self, utterance: Utterance) -> None:
        """Phonemes must be in the voice's set; any rate is fine (it scales the length)."""
        known = self.piper.phoneme_id_map
        for part in utterance.parts:
            if not isinstance(part, Phonemes):
                continue
            unknown = sorted({symbol for symbol in _symbols(part) if symbol not in known})
            if unknown:
                listed = ", ".join(f"{s!r} (U+{ord(s):04X})" for s in unknown)
                raise TextError(
                    f"phonemes {part.symbols!r}: {listed} not in voice {self.name!r}'s phoneme set"
                )

    def ids(self, phonemes: list[str]) -> list[int]:
        from piper.phoneme_ids import phonemes_to_ids

        return phonemes_to_ids(phonemes, self.piper.phoneme_id_map)

    def feeds(
        self, phonemes: list[str], options: SpeechOptions, speaker: int | None
    ) -> Mapping[str, np.ndarray]:
        """The graph's inputs for one sentence's phonemes; each scale the request's, else the
        config's, else the JSON's."""

        def pick(request: float | None, configured: float | None, voice_default: float) -> float:
            return next(v for v in (request, configured, voice_default) if v is not None)

        scales = np.array(
            [
                pick(options.noise_scale, self.config.noise_scale, self.piper.noise_scale),
                pick(options.length_scale, self.config.length_scale, self.piper.length_scale)
                / options.rate,
                pick(options.noise_w, self.config.noise_w, self.piper.noise_w_scale),
            ],
            dtype=np.float32,
        )
        ids = self.ids(phonemes)
        feeds: dict[str, Any] = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": scales,
        }
        if speaker is not None:
            feeds["sid"] = np.array([speaker], dtype=np.int64)
        return feeds


def _symbols(phonemes: Phonemes) -> list[str]:
    """IPA as Piper's phoneme ids see it: decomposed, one code point per symbol."""
    return list(unicodedata.normalize("NFD", phonemes.symbols))
