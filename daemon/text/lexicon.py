"""The pronunciation lexicon: whole words (any case) replaced by a respelling or by phonemes,
after normalisation, so that an entry for "Nguyen" also applies to text a rule produced."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property

from daemon.config import LexiconConfig, LexiconEntry, PhonemeEntry
from daemon.text.script import Part, Phonemes


class Lexicon:
    def __init__(self, config: LexiconConfig) -> None:
        self.config = config

    def apply(self, text: str, voice: str) -> tuple[Part, ...]:
        """The text as parts: unchanged stretches, respellings joined in, phonemes apart."""
        found = self._pattern(voice)
        if found is None:
            return (text,)
        entries = self._entries(voice)
        parts: list[Part] = []
        written = ""
        start = 0
        for match in found.finditer(text):
            written += text[start : match.start()]
            entry = entries[match.group(0).casefold()]
            if isinstance(entry, PhonemeEntry):
                if written.strip():
                    parts.append(written.strip())
                parts.append(Phonemes(entry.phonemes))
                written = ""
            else:
                written += entry
            start = match.end()
        written += text[start:]
        if written.strip():
            parts.append(written.strip())
        return tuple(parts)

    def _entries(self, voice: str) -> Mapping[str, LexiconEntry]:
        return self._by_voice.get(voice, self._global)

    def _pattern(self, voice: str) -> re.Pattern[str] | None:
        return self._patterns.get(voice if voice in self._by_voice else "")

    @cached_property
    def _global(self) -> dict[str, LexiconEntry]:
        return {word.casefold(): entry for word, entry in self.config.words.items()}

    @cached_property
    def _by_voice(self) -> dict[str, dict[str, LexiconEntry]]:
        return {
            voice: {**self._global, **{w.casefold(): e for w, e in words.items()}}
            for voice, words in self.config.voices.items()
        }

    @cached_property
    def _patterns(self) -> dict[str, re.Pattern[str] | None]:
        def pattern(entries: Mapping[str, LexiconEntry]) -> re.Pattern[str] | None:
            if not entries:
                return None
            words = sorted(entries, key=len, reverse=True)  # "New York" before "New"
            alternatives = "|".join(re.escape(word) for word in words)
            return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

        patterns = {"": pattern(self._global)}
        patterns.update({voice: pattern(entries) for voice, entries in self._by_voice.items()})
        return patterns
