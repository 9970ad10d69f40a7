"""When each word of a sentence is said, from the frames a VITS duration predictor gave each
phoneme id (the graph's rounded-up widths, the tensor piper-tts calls its alignments).

espeak-ng does not phonemize word by word: it joins unstressed words ("of the" → ʌvðə) and
reads some words as several. The sentence's phoneme words are therefore matched to its written
words by the length of each word's own phonemes, in order, and a phoneme word said for several
written words is shared among them by those lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache

import numpy as np

from daemon.audio.piece import WordTiming

BOS, EOS, PAD, SPACE = "^", "$", "_", " "
# Symbols that are not sounds of a word: a pause after it (punctuation) or stress and length.
_SILENT = set(",.;:!?¡¿—…\"()[]'«»") | {SPACE}
_MARKS = set("ˈˌː")
# How many written words one phoneme word may stand for, and how many phoneme words one
# written word may become ("1234" read as four words by espeak-ng).
_MOST_WRITTEN_PER_SAID = 4
_MOST_SAID_PER_WRITTEN = 6


def phoneme_word_spans(
    phonemes: Sequence[str],
    id_map: Mapping[str, Sequence[int]],
    frames_per_id: np.ndarray,
    seconds_per_frame: float,
) -> list[tuple[str, float, float]] | None:
    """Each phoneme word (symbols between spaces) with the seconds it starts and ends, its
    trailing pause left out; None when the frames do not fit the phonemes' ids."""
    frames = np.asarray(frames_per_id, dtype=np.float64).reshape(-1)
    pad = len(id_map.get(PAD, ()))
    index = len(id_map.get(BOS, ())) + pad
    time = float(frames[:index].sum()) * seconds_per_frame
    words: list[tuple[str, float, float]] = []
    symbols, start, end = "", None, time
    for phoneme in phonemes:
        if phoneme not in id_map:
            continue  # phonemes_to_ids skips it too
        width = len(id_map[phoneme]) + pad
        said_until = (
            time + float(frames[index : index + len(id_map[phoneme])].sum()) * seconds_per_frame
        )
        duration = float(frames[index : index + width].sum()) * seconds_per_frame
        if phoneme == SPACE:
            if symbols:
                words.append((symbols, start if start is not None else end, end))
            symbols, start = "", None
        else:
            symbols += phoneme
            if phoneme not in _SILENT and phoneme not in _MARKS:
                start = time if start is None else start
                end = said_until
        time += duration
        index += width
    if symbols:
        words.append((symbols, start if start is not None else end, end))
    if index + len(id_map.get(EOS, ())) != len(frames):
        return None
    return words


def _sounds(symbols: str) -> int:
    return sum(1 for symbol in symbols if symbol not in _SILENT and symbol not in _MARKS)


def time_words(
    written: Sequence[str],
    said: Sequence[tuple[str, float, float]],
    phonemize_word: Callable[[str], str],
) -> list[WordTiming]:
    """The written words of a sentence with the times of the phoneme words said for them."""
    if len(written) == len(said):
        return [WordTiming(w, s, e) for w, (_, s, e) in zip(written, said, strict=True)]
    own = [max(1, _sounds(phonemize_word(word))) for word in written]
    heard = [max(1, _sounds(symbols)) for symbols, _, _ in said]
    return _shared(written, own, said, _match(own, heard))


def _match(own: Sequence[int], heard: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Groups (written from, to, said from, to) covering both sequences in order, one side of
    each group a single word, with the least difference of phoneme counts."""
    n, m = len(own), len(heard)

    @cache
    def best(i: int, j: int) -> tuple[float, tuple[tuple[int, int, int, int], ...]]:
        if i == n and j == m:
            return 0.0, ()
        if i == n or j == m:  # words left on one side only: the last group takes them
            return float("inf"), ()
        options = []
        for a in range(1, _MOST_WRITTEN_PER_SAID + 1):
            for b in range(1, _MOST_SAID_PER_WRITTEN + 1):
                if (a > 1 and b > 1) or i + a > n or j + b > m:
                    continue
                written, heard_here = sum(own[i : i + a]), sum(heard[j : j + b])
                cost = abs(written - heard_here) / max(written, heard_here) + 0.1 * (a + b - 2)
                rest, groups = best(i + a, j + b)
                options.append((cost + rest, ((i, i + a, j, j + b), *groups)))
        return min(options, key=lambda option: option[0], default=(float("inf"), ()))

    return list(best(0, 0)[1])


def _shared(
    written: Sequence[str],
    own: Sequence[int],
    said: Sequence[tuple[str, float, float]],
    groups: Sequence[tuple[int, int, int, int]],
) -> list[WordTiming]:
    timed: list[WordTiming] = []
    for w_from, w_to, s_from, s_to in groups:
        start, end = said[s_from][1], said[s_to - 1][2]
        total = sum(own[w_from:w_to])
        at = start
        for index in range(w_from, w_to):
            until = at + (end - start) * own[index] / total
            timed.append(WordTiming(written[index], at, until))
            at = until
    return timed
