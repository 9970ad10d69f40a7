"""`text`: limits, normalisation and the pronunciation lexicon. A lexicon file's entries are
read by the config's file checks (daemon.admin.config_checks), not here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from daemon.config.base import StrictModel, VoiceName, resolve_path


class PhonemeEntry(StrictModel):
    phonemes: str = Field(min_length=1, max_length=400, description="IPA, in the voice's set")


LexiconEntry = Annotated[str, Field(min_length=1, max_length=400)] | PhonemeEntry
LexiconWords = dict[Annotated[str, Field(min_length=1, max_length=100)], LexiconEntry]


class LexiconConfig(StrictModel):
    """Words said another way: a respelling, or IPA phonemes. A file's entries come first and
    the inline ones override them; a voice's own entries override the global ones."""

    file: Path | None = Field(None, description="YAML file with `words:` and `voices:`")
    words: LexiconWords = Field(default_factory=dict, description="word → respelling or phonemes")
    voices: dict[VoiceName, LexiconWords] = Field(
        default_factory=dict, description="voice → its own words"
    )

    _resolve = field_validator("file")(resolve_path)


# Reloadable, every key (the lexicon too): marked where Config declares `text`.
class TextConfig(StrictModel):
    max_chars: int = Field(10_000, ge=1, le=1_000_000, description="longest text accepted")
    max_sentence_chars: int = Field(
        400, ge=20, le=10_000, description="longer sentences are split at a pause or a space"
    )
    normalize: bool = Field(
        True, description="read times, dates, money, measures and abbreviations as words"
    )
    ssml_max_depth: int = Field(32, ge=2, le=256, description="deepest nesting of SSML tags")
    lexicon: LexiconConfig = Field(default_factory=LexiconConfig)
