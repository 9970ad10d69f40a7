"""The phrase cache with the real voice: hits replay exactly, bounded, corruption never plays."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.service.settings import Settings
from daemon.speech.cache import SUFFIX, PhraseCache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.base import SpeechOptions

TEXT = "The next bus leaves in five minutes."


@pytest.fixture
def cached(registry, config, tmp_path):
    cache = PhraseCache(tmp_path / "phrases", max_bytes=10_000_000)
    return Synthesizer(registry, Settings(config), cache), cache


def audio(chunks) -> np.ndarray:
    return np.concatenate([c.samples for c in chunks])


def test_second_request_is_a_hit_with_the_same_audio(cached):
    synthesizer, cache = cached
    first = list(synthesizer.synthesize(TEXT))
    second = list(synthesizer.synthesize("  The next bus   leaves in five minutes. "))
    assert not any(c.from_cache for c in first) and all(c.from_cache for c in second)
    np.testing.assert_array_equal(audio(first), audio(second))
    assert [c.sentence_end for c in first] == [c.sentence_end for c in second]
    assert (cache.hits, cache.misses) == (1, 1)


def test_volume_is_applied_after_the_cache(cached):
    synthesizer, _ = cached
    full = audio(synthesizer.synthesize(TEXT))
    half = audio(synthesizer.synthesize(TEXT, options=SpeechOptions(volume=0.5)))
    np.testing.assert_allclose(half, full * 0.5, atol=1e-7)


def test_other_options_are_other_entries(cached):
    synthesizer, cache = cached
    list(synthesizer.synthesize(TEXT))
    slow = list(synthesizer.synthesize(TEXT, options=SpeechOptions(length_scale=1.5)))
    assert not any(c.from_cache for c in slow)
    assert cache.describe()["entries"] == 2


def test_least_recently_used_entries_go_first(cached):
    synthesizer, cache = cached
    first, second, third = "First phrase.", "A second phrase, the longest of them by far.", "Third."
    for text in (first, second):
        list(synthesizer.synthesize(text))
    cache.max_bytes = cache.describe()["bytes"]  # full: the next entry must evict one
    assert all(c.from_cache for c in synthesizer.synthesize(first)), "first is now most recent"
    list(synthesizer.synthesize(third))
    assert cache.describe()["bytes"] <= cache.max_bytes
    assert all(c.from_cache for c in synthesizer.synthesize(first))
    assert all(c.from_cache for c in synthesizer.synthesize(third))
    assert not any(c.from_cache for c in synthesizer.synthesize(second)), "second was evicted"


def test_corrupt_entry_is_dropped_never_played(cached):
    synthesizer, cache = cached
    list(synthesizer.synthesize(TEXT))
    (entry,) = cache.directory.glob(f"*{SUFFIX}")
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0x55
    entry.write_bytes(bytes(data))
    again = list(synthesizer.synthesize(TEXT))
    assert not any(c.from_cache for c in again) and cache.hits == 0
    assert all(c.from_cache for c in synthesizer.synthesize(TEXT)), "re-rendered and stored"


def test_unwritable_cache_degrades_to_plain_synthesis(registry, config, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = PhraseCache(blocker / "phrases", max_bytes=10_000_000)
    synthesizer = Synthesizer(registry, Settings(config), cache)
    assert len(audio(synthesizer.synthesize(TEXT))) > 0
    assert not cache.writable and "cannot use" in cache.describe()["problem"]


def test_interrupted_synthesis_stores_nothing(cached):
    synthesizer, cache = cached
    chunks = synthesizer.synthesize("One sentence. Another sentence. A third one.")
    next(chunks)
    chunks.close()
    assert cache.describe()["entries"] == 0
