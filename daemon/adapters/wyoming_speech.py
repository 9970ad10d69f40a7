"""What a Wyoming connection asks of the service: its `info` (voices, languages, speakers), the
audio of a text as `fastvoice say` makes it (in its turn: the synthesizer's one limit), a
voice's sample rate. The server makes one and hands it to every connection."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from daemon import __version__
from daemon.audio.sinks.handoff import Handoff
from daemon.config import Config
from daemon.service.commands import SayCommand, say_request
from daemon.service.front_door import FrontDoor
from daemon.text.ssml import is_ssml

if TYPE_CHECKING:
    from wyoming.tts import SynthesizeVoice


class WyomingSpeech:
    def __init__(self, door: FrontDoor) -> None:
        self.door = door
        # The threads requests' audio is made on (each waits its turn at the synthesizer).
        self.renders = ThreadPoolExecutor(8, thread_name_prefix="wyoming-render")

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

    def request(
        self,
        text: str,
        voice: SynthesizeVoice | None,
        context: dict[str, Any] | None,
        *,
        ssml: bool = False,
    ) -> SayCommand:
        """The one request type from a Wyoming request: its voice by name or by language (Home
        Assistant sends the pipeline's language), its speaker, and its pacing from `context`
        (`{"rate": 1.2, "sentence_pause_s": 0.5}`: the protocol's voice has no field for them).
        Text marked as SSML is SSML even without its `<speak>`. CommandError names a bad
        field."""
        context = context or {}
        speaker = voice and voice.speaker
        if ssml and not is_ssml(text):
            text = f"<speak>{text}</speak>"
        return say_request(
            text=text,
            voice=voice and voice.name,
            language=None if voice is None or voice.name else voice.language,
            speaker=int(speaker) if speaker and speaker.isdigit() else speaker,
            rate=context.get("rate", 1.0),
            sentence_pause_s=context.get("sentence_pause_s"),
        )

    def audio(self, request: SayCommand) -> tuple[Handoff, int]:
        """The request's audio as `fastvoice say` makes it, in its turn among the requests
        rendered beside the queue, handed to this loop; and its rate. A bad voice or text
        raises now."""
        rendering = self.door.render(request)
        return Handoff(rendering.blocks, rendering.rate, self.renders), rendering.rate

    def voice_of(self, voice: SynthesizeVoice | None) -> str:
        """The voice a request's `voice` names, by name or by language (Home Assistant sends
        the pipeline's language), else the default."""
        if voice is None:
            return self.door.choose_voice(None)
        return self.door.choose_voice(voice.name, voice.language)

    def rate_of(self, voice: str | None) -> int:
        return self.door.voice_info(voice).sample_rate
