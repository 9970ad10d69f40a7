"""The artifacts of a Piper (VITS) voice. On the CPU: the graph split into encoder and decoder
(streaming inside a sentence), optimised for this CPU at fp32 and at each variant `precision`
asks for, and under `auto` the quality gate's choice. On a GPU box: each part's graphs for the
ONNX Runtime GPU backends, and its TensorRT engine."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.config import VitsVoiceConfig
from daemon.errors import BackendError
from daemon.parts import WHOLE
from daemon.runtime.artifacts import Artifact
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices import loudness
from daemon.voices.piper_files import voice_files
from daemon.voices.vits import VitsVoice
from edge_build.artifact_writer import BuildResult
from edge_build.cpu_classes import CpuClass, this_cpu, vits_candidates
from edge_build.loudness import build_loudness, record_for
from edge_build.ort_optimize import build_ort_artifact
from edge_build.precision import make_variant
from edge_build.precision_choice import settle_precision
from edge_build.vits_split import PARTS, split_graphs
from edge_build.window_gate import window_approximations

if TYPE_CHECKING:  # made by edge_build.build on a box with a GPU
    from edge_build.gpu_steps import GpuSteps

log = logging.getLogger(__name__)


class VitsBuilder:
    """`cpu`: the class of box whose candidates `auto` tries (default: this one's)."""

    def __init__(
        self, name: str, config: VitsVoiceConfig, store: Path, cpu: CpuClass | None = None
    ) -> None:
        self.name = name
        self.config = config
        self.store = store
        self.model, _ = voice_files(name, config)
        self.stage = f"{name}/vits"
        self.cpu = cpu or this_cpu()
        candidates, self.not_tried = vits_candidates(self.cpu)
        self.candidates = tuple(candidate.precision for candidate in candidates)

    def build_cpu(
        self, *, precision: str, force: bool, verify: bool, progress: Callable[[str], None]
    ) -> list[BuildResult]:
        backend = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        results = []
        rebuilt = False
        with ExitStack() as cleanup:
            graphs: dict[str, Path] = {}  # the split source, made once for every precision
            for variant in self.variants(precision):
                started = time.perf_counter()
                found = _found(backend, self.model, variant)
                checked = [a for a in found if a is not None and verify]
                problems = [p for a in checked for p in a.verify(sha256=True)]
                if None in found or force or problems:
                    progress(f"{self.stage}: optimising the {variant} graphs for this CPU")
                    try:
                        if not graphs:  # nothing is written while everything is up to date
                            self.store.mkdir(parents=True, exist_ok=True)
                            temp = cleanup.enter_context(
                                tempfile.TemporaryDirectory(dir=self.store)
                            )
                            graphs = split_graphs(self.model, Path(temp))
                        built = build_parts(self.model, self.store, self.stage, variant, graphs)
                    except BackendError as error:
                        if variant == "fp32" or precision != "auto":
                            raise
                        log.warning("%s: no %s variant: %s", self.stage, variant, error)
                        continue
                    status = ("rebuilt: " + "; ".join(problems)) if problems else "built"
                    rebuilt = True
                else:
                    built, status = found, "up to date"
                for artifact in built:
                    label = f"{self.stage}/{artifact.manifest['part']}"
                    label += "" if variant == "fp32" else f"@{variant}"
                    seconds = time.perf_counter() - started
                    results.append(
                        BuildResult(self.name, label, status, artifact.directory, seconds)
                    )
        if precision == "auto":
            progress(f"{self.stage}: the precision quality gate")
            results.append(self.choose_precision(again=rebuilt or force))
        if self.config.normalize:
            results.append(build_loudness(self.name, self.config, self.store, force, progress))
        return results

    def build_gpu(self, steps: GpuSteps) -> list[BuildResult]:
        results = []
        self.store.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.store) as temp:
            for part, graph in split_graphs(self.model, Path(temp)).items():
                where = {"voice": self.name, "stage": self.stage, "source": self.model}
                fp16 = None
                if part != WHOLE:
                    for precision in ("fp32", "fp16"):
                        result, artifact = steps.onnx_part(
                            **where, part=part, graph=graph, precision=precision
                        )
                        results.append(result)
                        fp16 = artifact.model if precision == "fp16" else fp16
                if steps.engines:
                    results.append(steps.engine(**where, part=part, graph=graph, fp16=fp16))
        return results

    def missing(self, precision: str) -> list[str]:
        """What a CPU build would make now (a lookup finds only intact artifacts)."""
        fp32 = OrtCpuBackend(artifact_store=self.store, precision="fp32")
        missing = [
            f"{self.stage}@{variant}"
            for variant in self.variants(precision)
            if None in _found(fp32, self.model, variant)
        ]
        chosen = OrtCpuBackend(artifact_store=self.store, precision=precision)
        if precision == "auto" and chosen.precision_choice(self.model)[0] is None:
            missing.append(f"{self.stage}/precision")
        record = record_for(self.name, self.config, self.store)
        if self.config.normalize and loudness.read(record) is None:
            missing.append(f"{self.stage}/loudness")
        return missing

    def choose_precision(self, again: bool) -> BuildResult:
        """Runs the quality gate (once per box and model) and records what `auto` loads."""

        def load(precision: str) -> VitsVoice:
            backend = OrtCpuBackend(artifact_store=self.store, precision=precision)
            return VitsVoice(self.name, self.config, backend)

        return settle_precision(
            self.name,
            self.stage,
            self.model,
            self.store,
            load,
            self.candidates,
            again=again,
            gate_cpu=self.cpu,
            not_tried=self.not_tried,
            approximate=window_approximations,
        )

    def variants(self, precision: str) -> tuple[str, ...]:
        """The precisions a build makes for `runtime.precision`: fp32 always (the fallback),
        then this CPU class's candidates for the quality gate under `auto`, or the one asked
        for (a named variant is built on any class)."""
        asked = self.candidates if precision == "auto" else (precision,)
        return ("fp32", *(variant for variant in asked if variant not in ("fp32", "exact")))


def _found(backend: OrtCpuBackend, model: Path, precision: str) -> list[Artifact | None]:
    found = [backend.find_artifact(model, part, precision)[0] for part in PARTS]
    if None in found:
        whole = backend.find_artifact(model, WHOLE, precision)[0]  # a graph that does not split
        found = [whole] if whole is not None else found
    return found


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
