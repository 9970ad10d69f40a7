"""`fastvoice build`: make (or check) the artifacts of every configured voice for this box."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from daemon.config import Config, VoiceConfig
from daemon.errors import BackendError
from daemon.runtime.artifacts import Artifact
from daemon.runtime.ort_cpu import WHOLE, OrtCpuBackend
from daemon.voices.vits import VitsVoice, voice_files
from daemon.voices.voice_pack import GRAPHS, VoicePack, graph_file
from edge_build.ort_optimize import build_ort_artifact, write_precision_choice
from edge_build.precision import VARIANTS, make_variant
from edge_build.quality_gate import evaluate
from edge_build.vits_split import PARTS, split_graphs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildResult:
    voice: str
    stage: str
    status: str
    directory: Path
    seconds: float


def build_voices(
    config: Config,
    store: Path,
    force: bool = False,
    verify: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[BuildResult]:
    """The CPU artifacts of every voice (the last backend of every chain), and on a box with an
    NVIDIA GPU the GPU ones too; `progress` hears what a long build is doing."""
    progress = progress or log.info
    results = build_cpu_voices(config, store, force, verify, progress)
    if config.runtime.backend != "ort-cpu" and config.runtime.artifacts:
        from daemon.runtime.gpu import probe
        from edge_build.gpu_build import build_gpu_voices

        stack = probe(config.gpu.device)
        if stack.device is not None:
            results += build_gpu_voices(config, store, stack, force, verify, progress)
    return results


def build_cpu_voices(
    config: Config,
    store: Path,
    force: bool = False,
    verify: bool = False,
    progress: Callable[[str], None] = log.info,
) -> list[BuildResult]:
    backend = OrtCpuBackend(artifact_store=store, precision="fp32")
    results = []
    for name, voice_config in sorted(config.voices.items()):
        if voice_config.family == "cosyvoice2":
            results += build_pack_graphs(
                backend, name, voice_config, store, force, verify, progress
            )
            continue
        model, _ = voice_files(name, voice_config)
        stage = f"{name}/vits"
        precision = config.runtime.precision
        rebuilt = False
        with ExitStack() as cleanup:
            graphs: dict[str, Path] = {}  # the split source, made once for every precision
            for variant in _variants(precision):
                started = time.perf_counter()
                found = _found(backend, model, variant)
                checked = [a for a in found if a is not None and verify]
                problems = [p for a in checked for p in a.verify(sha256=True)]
                if None in found or force or problems:
                    progress(f"{stage}: optimising the {variant} graphs for this CPU")
                    try:
                        if not graphs:  # nothing is written while everything is up to date
                            store.mkdir(parents=True, exist_ok=True)
                            temp = cleanup.enter_context(tempfile.TemporaryDirectory(dir=store))
                            graphs = split_graphs(model, Path(temp))
                        built = build_parts(model, store, stage, variant, graphs)
                    except BackendError as error:
                        if variant == "fp32" or precision != "auto":
                            raise
                        log.warning("%s: no %s variant: %s", stage, variant, error)
                        continue
                    status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
                    rebuilt = True
                else:
                    built, status = found, "up to date"
                for artifact in built:
                    label = f"{stage}/{artifact.manifest['part']}"
                    label += "" if variant == "fp32" else f"@{variant}"
                    seconds = time.perf_counter() - started
                    results.append(BuildResult(name, label, status, artifact.directory, seconds))
        if precision == "auto":
            progress(f"{stage}: the precision quality gate")
            results.append(
                choose_precision(name, voice_config, model, store, stage, rebuilt or force)
            )
    return results


def missing_artifacts(config: Config, store: Path, gpu: bool) -> list[str]:
    """What a build would make now, found without building: empty when the service can load
    at once (a lookup finds only intact artifacts: each file's size and checksum are checked).
    On a box with a GPU backend in play (`gpu`) the engines are always named: only a build can
    check them."""
    if gpu:
        return ["the GPU engines"]
    fp32 = OrtCpuBackend(artifact_store=store, precision="fp32")
    chosen = OrtCpuBackend(artifact_store=store, precision=config.runtime.precision)
    missing = []
    for name, voice_config in sorted(config.voices.items()):
        if voice_config.family == "cosyvoice2":
            assert voice_config.pack is not None
            pack = VoicePack.open(voice_config.pack)
            for graph in GRAPHS:
                artifact, _ = fp32.find_artifact(pack.path(graph_file(graph)))
                if artifact is None:
                    missing.append(f"{name}/{graph}")
            continue
        model, _ = voice_files(name, voice_config)
        precision = config.runtime.precision
        for variant in _variants(precision):
            if None in _found(fp32, model, variant):
                missing.append(f"{name}/vits@{variant}")
        if precision == "auto" and chosen.precision_choice(model)[0] is None:
            missing.append(f"{name}/vits/precision")
    return missing


def build_pack_graphs(
    backend: OrtCpuBackend,
    name: str,
    voice_config: VoiceConfig,
    store: Path,
    force: bool,
    verify: bool,
    progress: Callable[[str], None],
) -> list[BuildResult]:
    """Each graph of a CosyVoice 2 voice pack optimised for this CPU (fp32: the pack's parity
    is proven at fp32); with `verify`, the pack's own files are checked against its hashes."""
    assert voice_config.pack is not None
    pack = VoicePack.open(voice_config.pack)
    if verify:
        problems = pack.verify()
        if problems:
            raise BackendError(f"voice {name!r}: {'; '.join(problems)} (export the pack again)")
    results = []
    for graph in GRAPHS:
        started = time.perf_counter()
        source = pack.path(graph_file(graph))
        stage = f"{name}/{graph}"
        found, _ = backend.find_artifact(source)
        problems = found.verify(sha256=True) if found is not None and verify else []
        if found is None or force or problems:
            progress(f"{stage}: optimising the graph for this CPU")
            found = build_ort_artifact(source, store, stage)
            status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
        else:
            status = "up to date"
        results.append(
            BuildResult(name, stage, status, found.directory, time.perf_counter() - started)
        )
    return results


def _variants(precision: str) -> tuple[str, ...]:
    """The precisions a build makes for `runtime.precision`: fp32 always (the fallback), then
    every variant for the quality gate under `auto`, or the one asked for."""
    asked = VARIANTS if precision == "auto" else (precision,)
    return ("fp32", *(variant for variant in asked if variant != "fp32"))


def _found(backend: OrtCpuBackend, model: Path, precision: str) -> list[Artifact | None]:
    found = [backend.find_artifact(model, part, precision)[0] for part in PARTS]
    if None in found:
        whole = backend.find_artifact(model, WHOLE, precision)[0]  # a graph that does not split
        found = [whole] if whole is not None else found
    return found


def choose_precision(
    name: str, voice_config: VoiceConfig, model: Path, store: Path, stage: str, again: bool
) -> BuildResult:
    """Runs the quality gate (once per box and model) and records what `auto` loads."""
    started = time.perf_counter()
    choice = OrtCpuBackend(artifact_store=store).precision_choice(model)[0]
    if choice is None or again:

        def load(precision: str) -> VitsVoice:
            return VitsVoice(
                name, voice_config, OrtCpuBackend(artifact_store=store, precision=precision)
            )

        chosen, reason, verdicts = evaluate(load, VARIANTS)
        verdict = {
            "chosen": chosen,
            "reason": reason,
            "verdicts": [v.as_dict() for v in verdicts],
        }
        choice = write_precision_choice(model, store, stage, verdict)
        status = reason
    else:
        status = f"up to date: {choice.manifest['reason']}"
    return BuildResult(
        name, f"{stage}/precision", status, choice.directory, time.perf_counter() - started
    )


def build_parts(
    model: Path,
    store: Path,
    stage: str,
    precision: str = "fp32",
    graphs: dict[str, Path] | None = None,
) -> list[Artifact]:
    """The artifacts of each part (`graphs`, split here when not given), converted to
    `precision` first when it is not fp32."""
    store.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store) as temp:
        graphs = graphs or split_graphs(model, Path(temp))
        if precision != "fp32":
            graphs = {
                part: make_variant(graph, precision, Path(temp) / f"{part}-{precision}.onnx")
                for part, graph in graphs.items()
            }
        return [
            build_ort_artifact(model, store, stage, part, graph, precision)
            for part, graph in graphs.items()
        ]
