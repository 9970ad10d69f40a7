"""What a Wyoming connection asks of the service: its `info` (voices, languages, speakers), the
audio of a text as `fastvoice say` makes it (in its turn: the synthesizer's one limit), a
voice's sample rate. The server makes one and hands it to every connection."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from daemon import __version__
from daemon.config import Config
from daemon.service.front_door import FrontDoor
from daemon.voices.base import SpeechOptions


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
        self, text: str, voice: str | None, speaker: str | None, *, ssml: bool = False
    ) -> Iterator[np.ndarray]:
        """The audio of `text` as `fastvoice say` makes it, in its turn among the requests
        rendered beside the queue."""
        options = SpeechOptions(speaker=int(speaker) if speaker and speaker.isdigit() else speaker)
        return self.door.render(text, voice, options, ssml=ssml)

    def rate_of(self, voice: str | None) -> int:
        return self.door.voice_info(voice).sample_rate
