"""Piper-format VITS voices: espeak phonemes (piper-tts's phonemizer) → ids → one graph → audio."""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
import unicodedata
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from daemon.audio.limiter import LookaheadLimiter
from daemon.audio.piece import AudioPiece, WordTiming
from daemon.config import VitsVoiceConfig
from daemon.errors import GpuOutOfMemory, TextError, VoiceError
from daemon.runtime.artifacts import source_identity
from daemon.runtime.base import Backend, Stage
from daemon.text.script import Part, Phonemes, Utterance, join_words
from daemon.voices import loudness, word_timing
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo

REQUIRED_INPUTS = {"input", "input_lengths", "scales"}
# Streaming decode (86 latent frames = 1 s of audio): a sentence is decoded as a small first
# window (its audio can play at once), then windows sized from the decode speed just measured,
# so that each ends within BUDGET_SHARE of the audio still ahead of playback: few windows (little
# context overhead) on a fast box, small ones on a slow or busy one, never a gap mid-sentence; a
# rest of at most half a window joins the window before it. The speed is measured on the window
# before, with its context: the first window's is the lowest per frame, so the estimate errs on the
# safe side, and a quarter of the time ahead is left as margin (with half, a medium sentence took
# three windows where two do, each with its context decoded twice).
# Without a measured loudness gain a sentence of up to STREAM_MIN_FRAMES is decoded whole: Piper's
# per-sentence peak normalisation needs its end before its start can play.
# Each window has CONTEXT_FRAMES of context on both sides: the decoder's receptive field reaches
# 12 frames (with 12 the joined windows equal one whole decode exactly; with 8 they differ by
# 6e-4), and every context frame is decoded twice, so no more. MAX_WINDOW_FRAMES bounds the
# decoder's activation memory: about 0.45 MB per frame on the CPU (ONNX Runtime's arena holds
# it until the box is idle), 230 MB for 512 frames; a longer window saves only its context (under
# 5 %).
log = logging.getLogger(__name__)
STREAM_MIN_FRAMES = 256
FIRST_WINDOW_FRAMES = 32
MAX_WINDOW_FRAMES = 512
CONTEXT_FRAMES = 12
SMALLEST_WINDOW_FRAMES = 16  # out of GPU memory below this: the request fails
BUDGET_SHARE = 0.75
GAIN_RAMP_S = 0.005
# espeak-ng keeps global state (the selected voice): one phonemizer call at a time per process.
_ESPEAK_LOCK = threading.Lock()
_espeak = None


@lru_cache(maxsize=8192)
def _espeak_word(language: str, word: str) -> str:
    """A word's phonemes alone, for word timings: words recur, and espeak-ng is asked one at a
    time."""
    return "".join(symbol for sentence in _phonemize_espeak(language, word) for symbol in sentence)


def _phonemize_espeak(language: str, text: str) -> list[list[str]]:
    global _espeak
    from piper.phonemize_espeak import EspeakPhonemizer

    with _ESPEAK_LOCK:
        if _espeak is None:
            _espeak = EspeakPhonemizer()
        return _espeak.phonemize(language, text)


def voice_files(name: str, config: VitsVoiceConfig) -> tuple[Path, Path]:
    """The model and its JSON, from paths or from an installed package (the config has one)."""
    if config.model is not None:
        model = config.model
        json_path = config.config or model.with_name(model.name + ".json")
    else:
        package_name = str(config.package)
        try:
            package = importlib.import_module(package_name)
        except ImportError as error:
            raise VoiceError(
                f"voice {name!r}: package {package_name!r} is not installed "
                f"(pip install {package_name.replace('_', '-')}): {error}"
            ) from None
        if not (hasattr(package, "model_path") and hasattr(package, "config_path")):
            raise VoiceError(
                f"voice {name!r}: package {package_name!r} has no model_path()/config_path()"
            )
        model, json_path = Path(package.model_path()), Path(package.config_path())
    for path in (model, json_path):
        if not path.is_file():
            raise VoiceError(f"voice {name!r}: {path} does not exist")
    return model, json_path


def _read_piper_config(name: str, json_path: Path):
    from piper.config import PhonemeType, PiperConfig

    try:
        raw = json.loads(json_path.read_text(encoding="utf-8"))
        piper_config = PiperConfig.from_dict(raw)
    except json.JSONDecodeError as error:
        raise VoiceError(f"voice {name!r}: {json_path} is not valid JSON: {error}") from None
    except KeyError as error:
        raise VoiceError(f"voice {name!r}: {json_path} lacks the key {error}") from None
    except (ValueError, TypeError) as error:
        raise VoiceError(f"voice {name!r}: {json_path}: {error}") from None
    if piper_config.phoneme_type not in (PhonemeType.ESPEAK, PhonemeType.TEXT):
        raise VoiceError(
            f"voice {name!r}: phoneme_type {piper_config.phoneme_type.value!r} is not supported "
            "(supported: espeak, text)"
        )
    return raw, piper_config


def loudness_record(store: Path, model: Path, json_path: Path, config: VitsVoiceConfig) -> Path:
    """Where `fastvoice build` keeps the voice's measured loudness: keyed by its files as loaded
    and the settings it is measured with."""
    settings = config.model_dump(mode="json", include={"length_scale", "noise_scale", "noise_w"})
    return loudness.record_path(store, model, json_path, settings)


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
        raw, self.piper = _read_piper_config(name, json_path)
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
        self._check_graph()
        self._check_espeak_voice()
        # The encoder's output the decoder does not read: frames per phoneme id (word timings).
        self._durations = None
        if self.encoder is not None and self.decoder is not None:
            latent = {spec.name for spec in self.decoder.inputs}
            extra = [spec.name for spec in self.encoder.outputs if spec.name not in latent]
            self._durations = extra[0] if len(extra) == 1 else None
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

    def _check_graph(self) -> None:
        inputs = (self.encoder or self.whole).input_names()
        missing = REQUIRED_INPUTS - inputs
        if missing:
            raise VoiceError(
                f"voice {self.name!r}: the graph lacks the inputs {sorted(missing)}; "
                "is this a Piper voice?"
            )
        multi = self.piper.num_speakers > 1
        if multi and "sid" not in inputs:
            raise VoiceError(
                f"voice {self.name!r}: the JSON declares {self.piper.num_speakers} speakers "
                "but the graph has no 'sid' input"
            )
        if not multi and "sid" in inputs:
            raise VoiceError(
                f"voice {self.name!r}: the graph takes a speaker id ('sid') "
                "but the JSON declares one speaker (num_speakers)"
            )
        unknown = inputs - REQUIRED_INPUTS - {"sid"}
        if unknown:
            raise VoiceError(
                f"voice {self.name!r}: the graph has unexpected inputs {sorted(unknown)}"
            )

    def _check_espeak_voice(self) -> None:
        from piper.config import PhonemeType

        if self.piper.phoneme_type != PhonemeType.ESPEAK:
            return
        try:
            _phonemize_espeak(self.piper.espeak_voice, "a")
        except RuntimeError as error:
            raise VoiceError(
                f"voice {self.name!r}: espeak-ng cannot speak its espeak.voice "
                f"{self.piper.espeak_voice!r} ({error})"
            ) from None

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
            if joined:
                joined.append(" ")
            if isinstance(part, Phonemes):
                joined.extend(_symbols(part))
            else:
                for said in self._phonemize(part):
                    joined.extend(said)
        return [joined]

    def _phonemize(self, text: str) -> list[list[str]]:
        from piper.config import PhonemeType

        if self.piper.phoneme_type == PhonemeType.TEXT:
            return [list(unicodedata.normalize("NFD", text))]
        return [p for p in _phonemize_espeak(self.piper.espeak_voice, text) if p]

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
        for phonemes, words_written in zip(said, written, strict=True):
            feeds = self._feeds(self.phoneme_ids(phonemes), options, speaker)
            words: tuple[WordTiming, ...] = ()
            if not self.streaming:
                pieces = self._decode_whole(feeds)
            else:
                latent = self._encode(feeds)
                if self._durations is not None:
                    frames = latent.pop(self._durations)
                    words = self._time_words(words_written, phonemes, frames)
                pieces = self._decode_windows(latent, stream_short=measured is not None)
            if measured is not None:
                limiter = LookaheadLimiter(rate, loudness.CEILING)
                for audio, last in pieces:
                    yield AudioPiece(
                        limiter.process(audio * np.float32(measured), last), last, words=words
                    )
                    words = ()
                continue
            gain = _StreamingGain(rate) if self.config.normalize else None
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
            return _espeak_word(self.piper.espeak_voice, word)
        return "".join(symbol for said in self._phonemize(word) for symbol in said)

    def _encode(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert self.encoder is not None
        names = (spec.name for spec in self.encoder.outputs)
        return dict(zip(names, self.encoder.run(feeds), strict=True))

    def _decode_whole(self, feeds: Mapping[str, np.ndarray]) -> Iterator[tuple[np.ndarray, bool]]:
        assert self.whole is not None
        yield self.whole.run(feeds)[0].reshape(-1).astype(np.float32), True

    def _decode_windows(
        self, latent: Mapping[str, np.ndarray], stream_short: bool
    ) -> Iterator[tuple[np.ndarray, bool]]:
        """The decoder over windows of the encoder's latent frames with context; a short
        sentence in one window unless `stream_short`."""
        assert self.decoder is not None
        frames = max(value.shape[-1] for value in latent.values())
        rate = self.piper.sample_rate
        start, made_s, first_yield = 0, 0.0, 0.0
        # An engine built for at most `limit` frames takes windows of that much, context included.
        limit = self.decoder.limits.get("frames")
        largest = MAX_WINDOW_FRAMES
        if limit is not None:
            largest = max(1, min(MAX_WINDOW_FRAMES, limit - 2 * CONTEXT_FRAMES))
        short = frames <= STREAM_MIN_FRAMES and not stream_short
        whole = short and (limit is None or frames <= limit)
        size = frames if whole else min(FIRST_WINDOW_FRAMES, largest)
        while start < frames:
            end = min(frames, start + size)
            fits = frames - start <= largest  # the rest fits one window
            if frames - end < max(FIRST_WINDOW_FRAMES, size // 2) and fits:
                end = frames  # no small last window: each costs its context twice
            left, right = max(0, start - CONTEXT_FRAMES), min(frames, end + CONTEXT_FRAMES)
            window = {
                name: value[..., left:right] if value.shape[-1] == frames else value
                for name, value in latent.items()
            }
            began = time.perf_counter()
            try:
                audio = self.decoder.run(window)[0].reshape(-1).astype(np.float32)
            except GpuOutOfMemory as error:
                # A batch-1 voice's analogue of a smaller batch: smaller windows, same audio
                # (each keeps its context frames), for the rest of the sentence.
                if end - start <= SMALLEST_WINDOW_FRAMES:
                    raise
                size = largest = max(SMALLEST_WINDOW_FRAMES, (end - start) // 2)
                log.warning("%s: %s; decoding windows of %d frames", self.name, error, size)
                continue
            frames_per_s = (right - left) / max(time.perf_counter() - began, 1e-6)
            hop = len(audio) // (right - left)
            piece = audio[(start - left) * hop : (end - left) * hop]
            made_s += len(piece) / rate
            first_yield = first_yield or time.perf_counter()
            yield piece, end == frames
            ahead_s = made_s - (time.perf_counter() - first_yield)  # if playback began at once
            budget = int(BUDGET_SHARE * ahead_s * frames_per_s) - 2 * CONTEXT_FRAMES
            start, size = end, min(max(budget, FIRST_WINDOW_FRAMES), largest)


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


class _StreamingGain:
    """Piper's per-sentence peak normalisation, for a sentence that arrives in pieces.

    The gain is set by the first piece (1 / its peak) and may only fall: a louder later piece
    lowers it, ramped over a few milliseconds. A sentence decoded in one piece gets exactly
    Piper's normalisation.
    """

    def __init__(self, sample_rate: int) -> None:
        self.ramp = int(sample_rate * GAIN_RAMP_S)
        self.gain: float | None = None

    def apply(self, audio: np.ndarray) -> np.ndarray:
        peak = float(np.max(np.abs(audio))) if audio.size else 0.0
        target = 1.0 / peak if peak > 1e-8 else None
        if self.gain is None:
            self.gain = target or 1.0
            return audio * np.float32(self.gain)
        new = min(self.gain, target) if target is not None else self.gain
        gains = np.full(len(audio), new, dtype=np.float32)
        length = min(self.ramp, len(audio))
        gains[:length] = np.linspace(self.gain, new, length, dtype=np.float32)
        self.gain = new
        return audio * gains
