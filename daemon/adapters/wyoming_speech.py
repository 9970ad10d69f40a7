"""What a Wyoming connection asks of the service: its `info` (voices, languages, speakers), the
audio of a text as `fastvoice say` makes it (in its turn: the synthesizer's one limit), a
voice's sample rate. The server makes one and hands it to every connection."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from daemon import __version__
from daemon.config import Config
from daemon.service.front_door import FrontDoor
from daemon.voices.base import SpeechOptions

if TYPE_CHECKING:
    from wyoming.tts import SynthesizeVoice


@dataclass(frozen=True)
class Pacing:
    """A request's speaking rate and pause between sentences, from its Wyoming `context`
    (`{"rate": 1.2, "sentence_pause_s": 0.5}`): the protocol's voice has no field for them."""

    rate: float = 1.0
    pause_s: float | None = None

    @classmethod
    def of(cls, context: dict[str, Any] | None) -> Pacing:
        """Raises ValueError naming a value out of range (an `error` event for the client)."""
        context = context or {}
        rate, pause_s = context.get("rate", 1.0), context.get("sentence_pause_s")
        if not isinstance(rate, int | float) or not 0.5 <= rate <= 2.0:
            raise ValueError(f"context.rate: {rate!r} is not a number from 0.5 to 2")
        if pause_s is not None and (not isinstance(pause_s, int | float) or not 0 <= pause_s <= 5):
            raise ValueError(f"context.sentence_pause_s: {pause_s!r} is not 0 to 5 seconds")
        return cls(float(rate), None if pause_s is None else float(pause_s))


class WyomingSpeech:
    def __init__(self, door: FrontDoor) -> None:
        self.door = door

    @property
    def config(self) -> Config:
        return self.door.config

    def info(self):
        from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

        attribution = Attribution(name="fastvoice", url="")
        voices = []
        for info in self.door.voices():
            voices.append(
                TtsVoice(
                    name=info.name,
                    description=f"{info.name} ({info.family}, {info.sample_rate} Hz)",
                    attribution=attribution,
                    installed=True,
                    version=None,
                    languages=[info.language],
                    speakers=[TtsVoiceSpeaker(s) for s in info.speakers] or None,
                )
            )
        program = TtsProgram(
            name="fastvoice",
            description="offline neural text to speech",
            attribution=attribution,
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    def blocks(
        self,
        text: str,
        voice: str | None,
        speaker: str | None,
        *,
        ssml: bool = False,
        pacing: Pacing | None = None,
    ) -> Iterator[np.ndarray]:
        """The audio of `text` as `fastvoice say` makes it, in its turn among the requests
        rendered beside the queue."""
        pacing = pacing or Pacing()
        chosen = int(speaker) if speaker and speaker.isdigit() else speaker
        options = SpeechOptions(speaker=chosen, rate=pacing.rate)
        return self.door.render(text, voice, options, ssml=ssml, pause_s=pacing.pause_s)

    def voice_of(self, voice: SynthesizeVoice | None) -> str:
        """The voice a request's `voice` names, by name or by language (Home Assistant sends
        the pipeline's language), else the default."""
        if voice is None:
            return self.door.choose_voice(None)
        return self.door.choose_voice(voice.name, voice.language)

    def rate_of(self, voice: str | None) -> int:
        return self.door.voice_info(voice).sample_rate
