"""Piper-format VITS voices: espeak phonemes (piper-tts's phonemizer) → ids → one graph → audio.

The voice's files and JSON: `piper_files`; what its graph is fed (phonemes, ids, speaker,
scales): `piper_inputs`; espeak-ng: `espeak`; a sentence decoded window by window:
`vits_windows`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from daemon.audio.limiter import LookaheadLimiter
from daemon.audio.piece import AudioPiece, WordTiming
from daemon.config import VitsVoiceConfig
from daemon.errors import VoiceError
from daemon.runtime import scheduling
from daemon.runtime.artifacts import source_identity
from daemon.runtime.base import Backend, Stage
from daemon.runtime.scheduling import FRAMES_PER_CHARACTER
from daemon.text.script import Part, Utterance
from daemon.voices import loudness, word_timing
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo
from daemon.voices.piper_files import (
    check_graph_inputs,
    loudness_record,
    read_piper_config,
    voice_files,
)
from daemon.voices.piper_inputs import PiperInputs
from daemon.voices.vits_windows import (
    EXACT_CONTEXT_FRAMES,
    DecodeSpeed,
    StreamingGain,
    WindowedDecoder,
)


class BothWays(NamedTuple):
    """A sentence decoded whole and in windows, and the frames the windows decoded."""

    exact: np.ndarray
    windowed: np.ndarray
    frames_decoded: int


class VitsVoice(Voice):
    def __init__(
        self,
        name: str,
        config: VitsVoiceConfig,
        backend: Backend,
        loudness_store: Path | None = None,
    ) -> None:
        """`loudness_store`: where `fastvoice build` keeps measured loudness (None: Piper's
        peak normalisation)."""
        self.name = name
        self.config = config
        model, json_path = voice_files(name, config)
        self.loudness = None
        if loudness_store is not None and config.normalize:
            self.loudness = loudness.read(loudness_record(loudness_store, model, json_path, config))
        # What was loaded, fixed at load time: the phrase cache keys on it for every request.
        self._files = (model, json_path)
        self._identity = {
            "family": "vits",
            "model": source_identity(model),
            "json": source_identity(json_path),
            "config": config.model_dump(mode="json"),
            # Measured loudness shapes the audio too: phrases cached before it are not reused.
            "loudness": None if self.loudness is None else self.loudness.as_dict(),
        }
        raw, self.piper = read_piper_config(name, json_path)
        stage = f"{name}/vits"
        self.encoder: Stage | None = None
        self.decoder: Stage | None = None
        self.whole: Stage | None = None
        # Decided once for every stage: under `auto` it reads the quality gate's verdict.
        precision = backend.precision_for(model)
        if all(backend.has_part(model, part, precision) for part in ("encoder", "decoder")):
            self.encoder = backend.load(model, stage, "encoder", precision)
            self.decoder = backend.load(model, stage, "decoder", precision)
            stages = (self.encoder.report, self.decoder.report)
        else:
            self.whole = backend.load(model, stage, precision=precision)
            stages = (self.whole.report,)
        check_graph_inputs(
            name, (self.encoder or self.whole).input_names(), self.piper.num_speakers
        )
        self.inputs = PiperInputs(name, config, self.piper)
        self._durations = _durations_output(self.encoder, self.decoder)
        # The decoder windows' context: exact unless the quality gate let this box approximate.
        approximations = precision.approximations if precision is not None else {}
        self.context_frames = int(approximations.get("context_frames", EXACT_CONTEXT_FRAMES))
        self._identity["context_frames"] = self.context_frames  # it shapes streamed audio
        self._decode_speed = DecodeSpeed()
        language = raw.get("language", {}).get("code") or self.piper.espeak_voice
        self.info = VoiceInfo(
            name=name,
            family="vits",
            language=language,
            sample_rate=self.piper.sample_rate,
            speakers=self.inputs.speakers,
            stages=stages,
        )
        self.default_speaker = self.inputs.speaker_id(config.speaker)

    def identity(self) -> dict[str, Any]:
        return self._identity

    @property
    def times_words(self) -> bool:
        return self._durations is not None

    def changed_on_disk(self) -> bool:
        model, json_path = self._files
        try:
            now = (source_identity(model), source_identity(json_path))
        except OSError:  # removed: the registry drops or reloads it
            return True
        return now != (self._identity["model"], self._identity["json"])

    @property
    def streaming(self) -> bool:
        """Whether long sentences are decoded window by window (needs `fastvoice build`)."""
        return self.decoder is not None

    def check_speaker(self, speaker: str | int | None) -> None:
        self.inputs.speaker_id(speaker)

    def check_utterance(self, utterance: Utterance) -> None:
        self.inputs.check_utterance(utterance)

    def phonemes(self, sentence: str | tuple[Part, ...]) -> list[list[str]]:
        return self.inputs.phonemes(sentence)

    def phoneme_ids(self, phonemes: list[str]) -> list[int]:
        return self.inputs.ids(phonemes)

    def synthesize_sentence(
        self, sentence: str | tuple[Part, ...], options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        speaker = (
            self.default_speaker
            if options.speaker is None
            else self.inputs.speaker_id(options.speaker)
        )
        measured = self.loudness.gain(speaker) if self.loudness is not None else None
        rate = self.piper.sample_rate
        said = self.inputs.phonemes(sentence)
        written = _written_groups(sentence, len(said))
        for number, (phonemes, words_written) in enumerate(zip(said, written, strict=True)):
            feeds = self.inputs.feeds(phonemes, options, speaker)
            words: tuple[WordTiming, ...] = ()
            # Its place among overlapping requests: the frames still to make, estimated.
            later = FRAMES_PER_CHARACTER * (
                options.characters_after + sum(len(group) for group in said[number + 1 :])
            )
            opening = options.opening and number == 0
            scheduling.before_run(later + FRAMES_PER_CHARACTER * len(phonemes), opening)
            if not self.streaming:
                pieces = self._decode_whole(feeds)
            else:
                latent = self._encode(feeds)
                if self._durations is not None:
                    frames = latent.pop(self._durations)
                    words = self._time_words(words_written, phonemes, frames)
                pieces = self._windows().decode(
                    latent,
                    stream_short=measured is not None,
                    later_frames=later,
                    opening=opening,
                    streamed=options.streamed,
                    ahead_s=options.ahead_s if number == 0 else None,
                )
            if measured is not None:
                limiter = LookaheadLimiter(rate, loudness.CEILING)
                for audio, last in pieces:
                    yield AudioPiece(
                        limiter.process(audio * np.float32(measured), last), last, words=words
                    )
                    words = ()
                continue
            gain = StreamingGain(rate) if self.config.normalize else None
            for audio, last in pieces:
                if gain is not None:
                    audio = gain.apply(audio)
                yield AudioPiece(np.clip(audio, -1.0, 1.0), last, words=words)
                words = ()

    def _time_words(
        self, written: list[str], phonemes: list[str], frames: np.ndarray
    ) -> tuple[WordTiming, ...]:
        """The words with when they are said; none when the frames do not fit or the words
        could not be told apart."""
        seconds_per_frame = self.piper.hop_length / self.piper.sample_rate
        said = word_timing.phoneme_word_spans(
            phonemes, self.piper.phoneme_id_map, frames, seconds_per_frame
        )
        if not said or not written:
            return ()

        return tuple(word_timing.time_words(written, said, self.inputs.word_phonemes))

    def decoded_both_ways(
        self,
        sentence: str,
        context_frames: int,
        window_frames: int | None,
        options: SpeechOptions,
    ) -> BothWays:
        """`sentence` from one encoding, decoded whole (the exact audio) and in windows with
        `context_frames` of context, each `window_frames` long after the first: what the
        quality gate compares."""
        if self.encoder is None or self.decoder is None:
            raise VoiceError(f"voice {self.name!r}: its graph is not split; nothing to window")
        exact: list[np.ndarray] = []
        windowed: list[np.ndarray] = []
        windows = WindowedDecoder(
            self.decoder, self.piper.sample_rate, self.name, context_frames, window_frames
        )
        for phonemes in self.inputs.phonemes(sentence):
            latent = self._encode(self.inputs.feeds(phonemes, options, self.default_speaker))
            if self._durations is not None:
                latent.pop(self._durations)
            exact.append(self.decoder.run(latent)[0].reshape(-1).astype(np.float32))
            windowed += [audio for audio, _ in windows.decode(latent, stream_short=True)]
        return BothWays(np.concatenate(exact), np.concatenate(windowed), windows.frames_decoded)

    def _windows(self) -> WindowedDecoder:
        """The decoder stage in windows, with the decode speed the voice last measured."""
        assert self.decoder is not None
        rate, context = self.piper.sample_rate, self.context_frames
        return WindowedDecoder(
            self.decoder, rate, self.name, context_frames=context, speed=self._decode_speed
        )

    def _encode(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert self.encoder is not None
        names = (spec.name for spec in self.encoder.outputs)
        return dict(zip(names, self.encoder.run(feeds), strict=True))

    def _decode_whole(self, feeds: Mapping[str, np.ndarray]) -> Iterator[tuple[np.ndarray, bool]]:
        assert self.whole is not None
        yield self.whole.run(feeds)[0].reshape(-1).astype(np.float32), True


def _durations_output(encoder: Stage | None, decoder: Stage | None) -> str | None:
    """The encoder's output the decoder does not read: frames per phoneme id (word timings)."""
    if encoder is None or decoder is None:
        return None
    latent = {spec.name for spec in decoder.inputs}
    extra = [spec.name for spec in encoder.outputs if spec.name not in latent]
    return extra[0] if len(extra) == 1 else None


def _written_groups(sentence: str | tuple[Part, ...], count: int) -> list[list[str]]:
    """The sentence's words in as many groups as espeak-ng made sentences of it (it splits
    after . ? and !); empty groups (no word timings) where the two cannot be matched."""
    parts = (sentence,) if isinstance(sentence, str) else sentence
    words = [
        word
        for part in parts
        for word in (part.split() if isinstance(part, str) else [f"[{part.symbols}]"])
    ]
    if count == 1:
        return [words]
    groups: list[list[str]] = [[]]
    for word in words:
        groups[-1].append(word)
        if word.endswith((".", "?", "!")):
            groups.append([])
    groups = [group for group in groups if group]
    return groups if len(groups) == count else [[] for _ in range(count)]
