"""Measures a voice's loudness on this box (EBU R128 integrated loudness, pyloudnorm) on
reference sentences in the voice's language, for each of its speakers, and records it where the
voice reads it at load (daemon.voices.loudness)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from daemon.box.files import replaced_atomically
from daemon.config import VitsVoiceConfig
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices import loudness
from daemon.voices.base import SpeechOptions, Voice
from daemon.voices.piper_files import loudness_record, voice_files
from daemon.voices.vits import VitsVoice
from edge_build.artifact_writer import BuildResult

# Announcement-like sentences, read in each language; numbers where there are none (espeak-ng
# reads digits in every one of its languages).
REFERENCE = {
    "en": (
        "The next train to the airport leaves from platform four.",
        "Please keep your belongings with you at all times.",
        "The museum closes in fifteen minutes.",
    ),
    "de": (
        "Der nächste Zug zum Flughafen fährt von Gleis vier.",
        "Bitte lassen Sie Ihr Gepäck nicht unbeaufsichtigt.",
        "Das Museum schließt in fünfzehn Minuten.",
    ),
    "fr": (
        "Le prochain train pour l'aéroport part du quai quatre.",
        "Merci de ne pas laisser vos bagages sans surveillance.",
        "Le musée ferme dans quinze minutes.",
    ),
    "es": (
        "El próximo tren al aeropuerto sale del andén cuatro.",
        "Por favor, no deje su equipaje desatendido.",
        "El museo cierra en quince minutos.",
    ),
    "it": (
        "Il prossimo treno per l'aeroporto parte dal binario quattro.",
        "Si prega di non lasciare il bagaglio incustodito.",
        "Il museo chiude tra quindici minuti.",
    ),
    "nl": (
        "De volgende trein naar het vliegveld vertrekt van spoor vier.",
        "Laat uw bagage niet onbeheerd achter.",
        "Het museum sluit over vijftien minuten.",
    ),
    "ja": (
        "空港行きの次の電車は、4番線から発車いたします。",
        "お荷物は、お手元から離さないようお願いいたします。",
        "博物館は、あと15分で閉館いたします。",
    ),
}
NUMBERS = ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10.", "11, 12, 13, 14, 15, 16, 17, 18, 19, 20.")
MANY_SPEAKERS = 16  # above this, one sentence per speaker keeps a build of hundreds short
PAUSE_S = 0.3


def reference_sentences(language: str) -> tuple[str, ...]:
    return REFERENCE.get(language.replace("-", "_").split("_")[0].lower(), NUMBERS)


def measure(voice: Voice, progress: Callable[[str], None]) -> loudness.Loudness:
    """Loudness and peak of the voice's unnormalised audio, per speaker."""
    import pyloudnorm

    rate = voice.info.sample_rate
    meter = pyloudnorm.Meter(rate)
    speakers: list[int | None] = list(range(len(voice.info.speakers))) or [None]
    sentences = reference_sentences(voice.info.language)
    if len(speakers) > MANY_SPEAKERS:
        sentences = sentences[:1]
    pause = np.zeros(int(PAUSE_S * rate), dtype=np.float32)
    lufs, peaks = {}, {}
    for number, speaker in enumerate(speakers, 1):
        if speaker is not None and (number == 1 or number % 10 == 0):
            progress(f"{voice.name}: measuring loudness, speaker {number}/{len(speakers)}")
        options = SpeechOptions(speaker=speaker)
        parts = []
        for sentence in sentences:
            parts += [piece.samples for piece in voice.synthesize_sentence(sentence, options)]
            parts.append(pause)
        audio = np.concatenate(parts)
        key = loudness.SINGLE if speaker is None else str(speaker)
        lufs[key] = round(float(meter.integrated_loudness(audio.astype(np.float64))), 3)
        peaks[key] = round(float(20 * np.log10(max(float(np.abs(audio).max()), 1e-9))), 3)
    return loudness.Loudness(lufs, peaks)


def record_for(name: str, config: VitsVoiceConfig, store: Path) -> Path:
    return loudness_record(store, *voice_files(name, config), config)


def build_loudness(
    name: str, config: VitsVoiceConfig, store: Path, force: bool, progress: Callable[[str], None]
) -> BuildResult:
    """Measures a Piper voice unless a record for it exists (or `force`)."""

    def raw() -> Voice:
        unnormalised = config.model_copy(update={"normalize": False})
        return VitsVoice(name, unnormalised, OrtCpuBackend(artifact_store=store))

    path = record_for(name, config, store)
    return measure_into(name, f"{name}/vits", path, raw, force, progress)


def measure_into(
    name: str,
    stage: str,
    path: Path,
    raw: Callable[[], Voice],
    force: bool,
    progress: Callable[[str], None],
) -> BuildResult:
    """Measures the voice `raw` loads (its audio as the graph makes it) into the record at
    `path`, unless one is there (or `force`)."""
    started = time.perf_counter()
    label = f"{stage}/loudness"
    existing = loudness.read(path)
    if existing is not None and not force:
        return BuildResult(name, label, "up to date", path.parent, time.perf_counter() - started)
    progress(f"{stage}: measuring its loudness (EBU R128)")
    measured = measure(raw(), progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(path) as out:
        out.write(json.dumps({"voice": name, **measured.as_dict()}, indent=2).encode())
    spread = max(measured.lufs.values()) - min(measured.lufs.values())
    status = f"measured {min(measured.lufs.values()):.1f} LUFS"
    if len(measured.lufs) > 1:
        status += f" (speakers within {spread:.1f} LU)"
    return BuildResult(name, label, status, path.parent, time.perf_counter() - started)
