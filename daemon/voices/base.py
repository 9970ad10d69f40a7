"""What every voice family offers: per-sentence synthesis and a description of itself."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from daemon.audio.piece import AudioPiece
from daemon.errors import TextError, VoiceError
from daemon.runtime.base import StageReport
from daemon.text.script import Part, Phonemes, Utterance


@dataclass(frozen=True)
class SpeechOptions:
    """Per-request settings; None means the voice's configured default."""

    speaker: str | int | None = None
    length_scale: float | None = None
    noise_scale: float | None = None
    noise_w: float | None = None
    volume: float = 1.0
    rate: float = 1.0  # SSML's speaking rate: 2 is twice as fast
    # Nothing of a streamed request has been made yet: a listener waits for this sentence's
    # first audio (a voice may then cut its first phrase short, at some cost to the whole).
    opening: bool = False
    # Someone hears the audio as it is made (a speaker, a stream): a voice decodes in small
    # windows, the first soonest. A file written whole waits only for the whole: few, large ones.
    streamed: bool = True
    # Audio of this request already made and not yet heard, had it played from its first piece
    # on (None before any): a voice may make this sentence's first audio in a larger piece.
    ahead_s: float | None = None
    # The request's text after this sentence, in characters: with requests overlapping, the
    # runs of the one with the least left go first (daemon.runtime.scheduling).
    characters_after: int = 0


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    family: str
    language: str
    sample_rate: int
    speakers: tuple[str, ...]
    stages: tuple[StageReport, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "language": self.language,
            "sample_rate": self.sample_rate,
            "speakers": list(self.speakers),
            "stages": [stage.as_dict() for stage in self.stages],
        }


class Voice(ABC):
    info: VoiceInfo

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that shapes this voice's audio (files and settings): a phrase cache key."""

    def cache_identity(self) -> dict[str, Any]:
        """`identity` and the precision each stage runs at: an int8 variant's phrase is not
        what the exact mode would say."""
        return {**self.identity(), "precision": [stage.precision for stage in self.info.stages]}

    @property
    def times_words(self) -> bool:
        """Whether its pieces carry their words' timings (captions)."""
        return False

    def changed_on_disk(self) -> bool:
        """Whether the files it was loaded from have been replaced since (a reinstall)."""
        return False

    def check_speaker(self, speaker: str | int | None) -> None:
        """VoiceError naming the known speakers when the voice has no such speaker."""
        names = self.info.speakers
        if speaker is None or speaker in names:
            return
        index = int(speaker) if isinstance(speaker, int) or speaker.isdigit() else -1
        if 0 <= index < max(1, len(names)):
            return
        known = ", ".join(names) if names else "it has one speaker, 0"
        raise VoiceError(f"voice {self.info.name!r}: unknown speaker {speaker!r} ({known})")

    def refuse_unused(self, options: SpeechOptions, unused: tuple[str, ...]) -> None:
        """VoiceError naming the options among `unused` that a request set: a setting the voice
        has no use for, dropped in silence, would look applied."""
        default = SpeechOptions()
        asked = [name for name in unused if getattr(options, name) != getattr(default, name)]
        if asked:
            raise VoiceError(
                f"voice {self.info.name!r} ({self.info.family}) does not take {', '.join(asked)}"
            )

    def check_utterance(self, utterance: Utterance) -> None:
        """Raises TextError for what this voice cannot do: by default, phonemes or a rate."""
        if any(isinstance(part, Phonemes) for part in utterance.parts):
            raise TextError(f"voice {self.info.name!r} ({self.info.family}) takes no phonemes")
        if utterance.rate != 1.0:
            raise TextError(
                f"voice {self.info.name!r} ({self.info.family}) cannot change its speaking rate"
            )

    @abstractmethod
    def synthesize_sentence(
        self, sentence: str | tuple[Part, ...], options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        """Audio at `info.sample_rate`, piece by piece as it is made, of a sentence or of one
        utterance's parts (words, and phonemes where the voice takes them).

        Yields nothing when the sentence holds nothing speakable.
        """
