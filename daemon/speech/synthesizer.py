"""Text → script → voices → audio pieces, one utterance at a time so playback starts early; a
chime first when the job asks for one (speech and chime are one job, cached together). Also the
one place where pieces are joined into what is played (sentence pauses, fades), and the one
limit on requests rendered beside the queue (Wyoming, HTTP): as many at once as there are
workers, whichever interface they come from."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, replace

import numpy as np

from daemon import faults
from daemon.audio.pcm import join_sentences
from daemon.audio.piece import AudioPiece
from daemon.audio.playback_lead import PlaybackLead
from daemon.audio.sounds import NO_SOUND, SoundLibrary
from daemon.config import ConfigInForce
from daemon.errors import TextError
from daemon.speech.cache import PhraseCache, cache_key
from daemon.speech.captions import WordClock
from daemon.speech.rendering import Rendering
from daemon.text.prepare import prepare
from daemon.text.script import Pause, Script, Sound, Utterance, cache_form
from daemon.voices.base import SpeechOptions
from daemon.voices.registry import VoiceRegistry


class Synthesizer:
    def __init__(
        self,
        voices: VoiceRegistry,
        settings: ConfigInForce,
        cache: PhraseCache | None = None,
        max_requests: int = 1,
    ) -> None:
        """`max_requests`: requests `rendered` makes at once; the others wait their turn."""
        self.voices = voices
        self.settings = settings
        self.cache = cache
        self.admission = threading.BoundedSemaphore(max_requests)
        self._sounds = SoundLibrary(settings.config.sounds.dir)
        self._fault_hook = faults.sentence_hook()  # None unless the fault tests armed one

    @property
    def sounds(self) -> SoundLibrary:
        """The sounds of the config in force (a reload may name another directory)."""
        directory = self.settings.config.sounds.dir
        if self._sounds.directory != directory:
            self._sounds = SoundLibrary(directory)
        return self._sounds

    def script(self, text: object, voice: str | None = None, *, ssml: bool = False) -> Script:
        """What `synthesize` would speak; raises TextError or VoiceError naming the problem."""
        name = self.voices.require(voice)
        return prepare(text, self.settings.config.text, name, self.voices, ssml_text=ssml)

    def joined(
        self, pieces: Iterable[AudioPiece], rate: int, pause_s: float | None = None
    ) -> Iterator[np.ndarray]:
        """Pieces as every interface plays or sends them: `audio.sentence_pause_s` (or
        `pause_s`) between sentences, `audio.fade_ms` at their edges."""
        return join_sentences(
            pieces, rate, self._pause(pause_s), self.settings.config.audio.fade_ms
        )

    def word_clock(self, rate: int, pause_s: float | None = None, lead_s: float = 0.0) -> WordClock:
        """A clock for the words of pieces joined by `joined` with the same `pause_s`, heard
        `lead_s` after the joined audio's start."""
        return WordClock(rate, self._pause(pause_s), lead_s)

    def _pause(self, pause_s: float | None) -> float:
        return self.settings.config.audio.sentence_pause_s if pause_s is None else pause_s

    def render(
        self,
        text: str,
        voice: str | None,
        options: SpeechOptions,
        *,
        pause_s: float | None = None,
        streamed: bool = True,
    ) -> Rendering:
        """A request answered beside the queue: its voice chosen and its text prepared once,
        here (a bad voice or text raises now, before any audio), its audio joined (`pause_s`
        between sentences, else the config's) as `Rendering.blocks`, its words on
        `Rendering.clock`. Not `streamed`: an answer sent whole (see `synthesize`). Made while
        holding one of the `max_requests` places (taken at the first block, given back at
        the end, or when the client goes and the generator is closed)."""
        name = self.voices.require(voice)
        script = self.script(text, name)
        rate = self.voices.get(name).info.sample_rate
        clock = self.word_clock(rate, pause_s)
        pieces = self.synthesize(text, name, options, streamed=streamed, script=script)
        blocks = self._admitted(self.joined(clock.follow(pieces), rate, pause_s))
        return Rendering(name, rate, blocks, clock)

    def _admitted(self, blocks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        with self.admission:
            yield from blocks

    def synthesize(
        self,
        text: object,
        voice: str | None = None,
        options: SpeechOptions | None = None,
        *,
        ssml: bool = False,
        chime: str | None = None,
        streamed: bool = True,
        script: Script | None = None,
    ) -> Iterator[AudioPiece]:
        """Yields pieces as they are made, `chime` (a sound's name) first. Bad text, voice or
        sound raises before any audio. `streamed`: someone waits for the first audio (a
        speaker, a stream), so the opening sentence may start with a short phrase; a file
        written whole waits only for the whole. `script`: `text` already prepared (a queued
        job's, prepared when it was accepted)."""
        options = replace(options or SpeechOptions(), opening=streamed, streamed=streamed)
        with self.voices.backend.request():
            yield from self._synthesize(text, voice, options, ssml, chime, script)

    def _synthesize(
        self,
        text: object,
        voice: str | None,
        options: SpeechOptions,
        ssml: bool,
        chime: str | None,
        script: Script | None,
    ) -> Iterator[AudioPiece]:
        if script is None:
            script = self.script(text, voice, ssml=ssml)
        chosen = self.voices.get(voice)
        rate = chosen.info.sample_rate
        gain = np.float32(options.volume)
        chime = None if chime == NO_SOUND else chime
        sound, inline = self._render_sounds(script, chime, rate)

        def scaled(samples: np.ndarray) -> np.ndarray:
            return samples * gain if gain != 1 else samples

        key = None
        if self.cache is not None:
            key = self._cache_key(voice, script, options, chime, sorted(inline))
            hit = self.cache.get(key)
            if hit is not None and hit[0] == rate:
                for piece in hit[1]:
                    yield replace(piece, samples=scaled(piece.samples), from_cache=True)
                return
        rendered: list[AudioPiece] = []
        lead = PlaybackLead()
        if sound is not None:
            rendered.append(AudioPiece(sound))
            lead.made(len(sound) / rate)
            yield replace(rendered[-1], samples=scaled(sound))
        spoken = [len(item.words()) if isinstance(item, Utterance) else 0 for item in script]
        for number, item in enumerate(script):
            if isinstance(item, Pause):
                silence = np.zeros(round(item.seconds * rate), np.float32)
                pieces: Iterable[AudioPiece] = [AudioPiece(silence, silence=True)]
            elif isinstance(item, Sound):
                pieces = [AudioPiece(inline[item.name])]
            else:
                heard = any(not piece.silence for piece in rendered)
                after = sum(spoken[number + 1 :])
                placed = replace(
                    options,
                    opening=options.opening and not heard,
                    characters_after=after,
                    ahead_s=lead.ahead_s(),
                )
                pieces = self._utterance(item, placed, rate)
            for piece in pieces:
                rendered.append(piece)
                lead.made(len(piece.samples) / rate)
                yield replace(piece, samples=scaled(piece.samples))
        if not any(not piece.silence for piece in rendered[sound is not None :]):
            raise TextError("the text holds nothing speakable")
        if self.cache is not None and key is not None:
            self.cache.put(key, rate, rendered)

    def _render_sounds(
        self, script: Script, chime: str | None, rate: int
    ) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
        """The chime and the script's sounds, every one rendered before any audio: an unknown
        one fails the job before it plays."""
        sound = None if chime is None else self.sounds.render(chime, rate)
        inline = {i.name: self.sounds.render(i.name, rate) for i in script if isinstance(i, Sound)}
        return sound, inline

    def _cache_key(
        self,
        voice: str | None,
        script: Script,
        options: SpeechOptions,
        chime: str | None,
        sounds: list[str],
    ) -> str:
        """The phrase cache's key: everything that shapes the audio (the voices as loaded,
        the script, the options but the volume, the sounds' files)."""
        used = {item.voice for item in script if isinstance(item, Utterance)}
        identity = {
            "voice": self.voices.get(voice).cache_identity(),
            "voices": [self.voices.get(name).cache_identity() for name in sorted(used)],
            "script": cache_form(script),
            # Not the volume (applied to hits), nor what only places or sizes the work.
            "options": {
                **asdict(options),
                "volume": None,
                "characters_after": None,
                "streamed": None,
                "ahead_s": None,
            },
        }
        if chime is not None:
            identity["chime"] = self.sounds.identity(chime)
        if sounds:
            identity["sounds"] = {name: self.sounds.identity(name) for name in sounds}
        return cache_key(identity)

    def _utterance(
        self, utterance: Utterance, options: SpeechOptions, rate: int
    ) -> Iterator[AudioPiece]:
        """One utterance at the request's rate: in another voice (SSML), resampled to it."""
        voice = self.voices.get(utterance.voice)
        if self._fault_hook is not None:
            self._fault_hook(utterance.words())
        options = replace(options, rate=options.rate * utterance.rate)
        resampler = None
        if voice.info.sample_rate != rate:
            import soxr

            resampler = soxr.ResampleStream(voice.info.sample_rate, rate, 1, dtype="float32")
        for piece in voice.synthesize_sentence(utterance.parts, options):
            samples = piece.samples
            if resampler is not None:
                samples = resampler.resample_chunk(samples, last=piece.sentence_end)
            if utterance.volume != 1.0:
                samples = np.clip(samples * np.float32(utterance.volume), -1.0, 1.0)
            yield replace(piece, samples=samples)
