"""Speech-token sampling for CosyVoice 2: repetition-aware sampling (RAS) over the LLM's
log-probabilities, with the random numbers of one request in one object.

RAS draws from the nucleus (top-p 0.8 within the top 25); when the token drawn already occurs
in the last 10 tokens at least once (10 x tau 0.1), it draws again from the whole distribution:
without that, the LLM falls into loops of the same tokens.
"""

from __future__ import annotations

import numpy as np

TOP_P = 0.8
TOP_K = 25
WINDOW = 10
TAU = 0.1


class Draws:
    """The random numbers of one request, in two independent streams from one seed: sampling
    (one uniform per draw) and the vocoder's excitation (initial phases, noise). Streamed and
    whole synthesis then draw the same numbers in the same order."""

    def __init__(self, seed: int) -> None:
        sampling, vocoder = np.random.SeedSequence(seed).spawn(2)
        self._sampling = np.random.default_rng(sampling)
        self._vocoder = np.random.default_rng(vocoder)

    def uniform(self) -> float:
        return float(self._sampling.random())

    def phases(self, harmonics: int) -> np.ndarray:
        """[1, harmonics] uniform in [0, 1): each harmonic's initial phase (a cycle fraction)."""
        return self._vocoder.random((1, harmonics), dtype=np.float32)

    def noise(self, samples: int, harmonics: int) -> np.ndarray:
        """[1, samples, harmonics] standard normal: the excitation's additive noise."""
        return self._vocoder.standard_normal((1, samples, harmonics), dtype=np.float32)


def pick(weights: np.ndarray, uniform: float) -> int:
    """The index a multinomial draw of one takes for `uniform` (inverse of the cumulative sum)."""
    cumulative = np.cumsum(weights, dtype=np.float64)
    index = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
    return min(index, len(weights) - 1)


def softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(), dtype=np.float32)
    return shifted / shifted.sum(dtype=np.float32)


def ras_sample(logp: np.ndarray, decoded: list[int], draws: Draws) -> int:
    """One token by RAS from `logp` [vocabulary], given the tokens decoded so far."""
    probabilities = softmax(logp.astype(np.float32))
    order = np.argsort(-probabilities, kind="stable")
    ranked = probabilities[order]
    # A token joins the nucleus while the mass before it is under TOP_P, up to TOP_K tokens.
    mass_before = np.concatenate([[0.0], np.cumsum(ranked, dtype=np.float32)[:-1]])
    size = min(TOP_K, int(np.searchsorted(mass_before, TOP_P, side="left")))
    token = int(order[pick(ranked[: max(size, 1)], draws.uniform())])
    if decoded[-WINDOW:].count(token) >= WINDOW * TAU:
        token = pick(probabilities, draws.uniform())
    return token
