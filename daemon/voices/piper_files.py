"""A Piper voice's files: the model and its JSON found (paths, or an installed voice package),
the JSON read with piper-tts's own reader, the graph's inputs checked against it, and where
`fastvoice build` keeps the voice's measured loudness."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from daemon.config import VitsVoiceConfig
from daemon.errors import VoiceError
from daemon.voices import loudness

REQUIRED_INPUTS = {"input", "input_lengths", "scales"}


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


def read_piper_config(name: str, json_path: Path) -> tuple[dict[str, Any], Any]:
    """The JSON as read, and as piper-tts's `PiperConfig`; a VoiceError names what is wrong."""
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


def check_graph_inputs(name: str, inputs: set[str], speakers: int) -> None:
    """The graph takes what a Piper voice's graph takes, and a speaker id exactly when the
    JSON declares more than one speaker."""
    missing = REQUIRED_INPUTS - inputs
    if missing:
        raise VoiceError(
            f"voice {name!r}: the graph lacks the inputs {sorted(missing)}; is this a Piper voice?"
        )
    if speakers > 1 and "sid" not in inputs:
        raise VoiceError(
            f"voice {name!r}: the JSON declares {speakers} speakers "
            "but the graph has no 'sid' input"
        )
    if speakers <= 1 and "sid" in inputs:
        raise VoiceError(
            f"voice {name!r}: the graph takes a speaker id ('sid') "
            "but the JSON declares one speaker (num_speakers)"
        )
    unknown = inputs - REQUIRED_INPUTS - {"sid"}
    if unknown:
        raise VoiceError(f"voice {name!r}: the graph has unexpected inputs {sorted(unknown)}")


def loudness_record(store: Path, model: Path, json_path: Path, config: VitsVoiceConfig) -> Path:
    """Where `fastvoice build` keeps the voice's measured loudness: keyed by its files as loaded
    and the settings it is measured with."""
    settings = config.model_dump(mode="json", include={"length_scale", "noise_scale", "noise_w"})
    return loudness.record_path(store, model, json_path, settings)
