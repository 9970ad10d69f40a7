"""When each word of a sentence is said, from the frames a VITS duration predictor gave each
phoneme id (the graph's rounded-up widths, the tensor piper-tts calls its alignments).

espeak-ng does not phonemize word by word: it joins unstressed words ("of the" → ʌvðə) and
reads some words as several. The sentence's phoneme words are therefore matched to its written
words by the length of each word's own phonemes, in order, and a phoneme word said for several
written words is shared among them by those lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate

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


# The groups a pair of sequences is matched by: one written word for up to six said ones, or up
# to four written words for one said one.
_GROUPS = tuple((1, b) for b in range(1, _MOST_SAID_PER_WRITTEN + 1)) + tuple(
    (a, 1) for a in range(2, _MOST_WRITTEN_PER_SAID + 1)
)
# How far the match may stray from the diagonal (the two sequences in proportion), in words.
_BAND = 8


def _match(own: Sequence[int], heard: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Groups (written from, to, said from, to) covering both sequences in order, one side of
    each group a single word, with the least difference of phoneme counts; empty when none
    stays within the band."""
    n, m = len(own), len(heard)
    own_sum, heard_sum = list(accumulate(own, initial=0)), list(accumulate(heard, initial=0))
    cost: dict[tuple[int, int], float] = {(n, m): 0.0}
    step: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(n - 1, -1, -1):
        middle = i * m / n
        for j in range(max(0, int(middle) - _BAND), min(m - 1, int(middle) + _BAND) + 1):
            best = None
            for a, b in _GROUPS:
                rest = cost.get((i + a, j + b))
                if rest is None:
                    continue
                written = own_sum[i + a] - own_sum[i]
                spoken = heard_sum[j + b] - heard_sum[j]
                total = rest + abs(written - spoken) / max(written, spoken) + 0.1 * (a + b - 2)
                if best is None or total < best:
                    best, step[(i, j)] = total, (a, b)
            if best is not None:
                cost[(i, j)] = best
    groups, i, j = [], 0, 0
    while (i, j) != (n, m):
        if (i, j) not in step:
            return []
        a, b = step[(i, j)]
        groups.append((i, i + a, j, j + b))
        i, j = i + a, j + b
    return groups


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
