"""Piper-format VITS voices: espeak phonemes (piper-tts's phonemizer) → ids → one graph → audio.

The voice's files and JSON: `piper_files`; espeak-ng: `espeak`; a sentence decoded window by
window: `vits_windows`."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from daemon.audio.limiter import LookaheadLimiter
from daemon.audio.piece import AudioPiece, WordTiming
from daemon.config import VitsVoiceConfig
from daemon.errors import TextError, VoiceError
from daemon.runtime import scheduling
from daemon.runtime.artifacts import source_identity
from daemon.runtime.base import Backend, Stage
from daemon.runtime.scheduling import FRAMES_PER_CHARACTER
from daemon.text.script import Part, Phonemes, Utterance, join_words, split_closing
from daemon.voices import espeak, loudness, word_timing
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo
from daemon.voices.piper_files import (
    check_graph_inputs,
    loudness_record,
    read_piper_config,
    voice_files,
)
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
        if backend.has_part(model, "encoder") and backend.has_part(model, "decoder"):
            self.encoder = backend.load(model, stage, "encoder")
            self.decoder = backend.load(model, stage, "decoder")
            stages = (self.encoder.report, self.decoder.report)
        else:
            self.whole = backend.load(model, stage)
            stages = (self.whole.report,)
        check_graph_inputs(
            name, (self.encoder or self.whole).input_names(), self.piper.num_speakers
        )
        self._check_espeak_voice()
        self._durations = _durations_output(self.encoder, self.decoder)
        # The decoder windows' context: exact unless the quality gate let this box approximate.
        self.context_frames = int(
            backend.approximations(model).get("context_frames", EXACT_CONTEXT_FRAMES)
        )
        self._identity["context_frames"] = self.context_frames  # it shapes streamed audio
        self._decode_speed = DecodeSpeed()
        language = raw.get("language", {}).get("code") or self.piper.espeak_voice
        self.info = VoiceInfo(
            name=name,
            family="vits",
            language=language,
            sample_rate=self.piper.sample_rate,
            speakers=self._speaker_names(),
            stages=stages,
        )
        self.default_speaker = self.speaker_id(config.speaker)

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

    def _check_espeak_voice(self) -> None:
        from piper.config import PhonemeType

        if self.piper.phoneme_type != PhonemeType.ESPEAK:
            return
        espeak.check_voice(self.name, self.piper.espeak_voice)

    def _speaker_names(self) -> tuple[str, ...]:
        if self.piper.num_speakers <= 1:
            return ()
        by_id = {index: name for name, index in self.piper.speaker_id_map.items()}
        return tuple(by_id.get(i, str(i)) for i in range(self.piper.num_speakers))

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
            f"(names: {', '.join(self.info.speakers[:10])}{'…' if count > 10 else ''}; "
            f"or an index 0 to {count - 1})"
        )

    def check_speaker(self, speaker: str | int | None) -> None:
        self.speaker_id(speaker)

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

    def phoneme_ids(self, phonemes: list[str]) -> list[int]:
        from piper.phoneme_ids import phonemes_to_ids

        return phonemes_to_ids(phonemes, self.piper.phoneme_id_map)

    def _feeds(
        self, ids: list[int], options: SpeechOptions, speaker: int | None
    ) -> Mapping[str, np.ndarray]:
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
        feeds: dict[str, Any] = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": scales,
        }
        if speaker is not None:
            feeds["sid"] = np.array([speaker], dtype=np.int64)
        return feeds

    def synthesize_sentence(
        self, sentence: str | tuple[Part, ...], options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        speaker = (
            self.default_speaker if options.speaker is None else self.speaker_id(options.speaker)
        )
        measured = self.loudness.gain(speaker) if self.loudness is not None else None
        rate = self.piper.sample_rate
        said = self.phonemes(sentence)
        written = _written_groups(sentence, len(said))
        for number, (phonemes, words_written) in enumerate(zip(said, written, strict=True)):
            feeds = self._feeds(self.phoneme_ids(phonemes), options, speaker)
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

        return tuple(word_timing.time_words(written, said, self._word_phonemes))

    def _word_phonemes(self, word: str) -> str:
        """One word's phonemes on its own (an SSML or lexicon `[phonemes]` as they are)."""
        from piper.config import PhonemeType

        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
        if self.piper.phoneme_type == PhonemeType.ESPEAK:
            return espeak.word_phonemes(self.piper.espeak_voice, word)
        return "".join(symbol for said in self._phonemize(word) for symbol in said)

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
        for phonemes in self.phonemes(sentence):
            feeds = self._feeds(self.phoneme_ids(phonemes), options, self.default_speaker)
            latent = self._encode(feeds)
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


def _symbols(phonemes: Phonemes) -> list[str]:
    """IPA as Piper's phoneme ids see it: decomposed, one code point per symbol."""
    return list(unicodedata.normalize("NFD", phonemes.symbols))
