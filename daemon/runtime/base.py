"""The backend interface: load a stage, run it, report what was really obtained."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from daemon.parts import WHOLE


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int | str | None, ...]


def ort_specs(args: list) -> tuple[TensorSpec, ...]:
    """TensorSpecs of an ONNX Runtime session's `get_inputs()` or `get_outputs()`."""
    return tuple(TensorSpec(a.name, a.type, tuple(a.shape)) for a in args)


@dataclass(frozen=True)
class StageReport:
    """What a loaded stage really runs on; shown by `fastvoice voices` and in status."""

    stage: str
    backend: str
    providers: tuple[str, ...]
    model_path: str
    load_s: float
    weights_bytes: int  # the graph and weights as loaded (file sizes)
    load_rss_bytes: int  # process RSS growth while loading; 0 if freed memory was reused
    threads: int | None = None  # intra-op threads of a run alone
    workers: int = 1  # runs at once (each with threads / workers when they overlap)
    precision: str = "fp32"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "backend": self.backend,
            "providers": list(self.providers),
            "model_path": self.model_path,
            "load_s": round(self.load_s, 3),
            "weights_bytes": self.weights_bytes,
            "load_rss_bytes": self.load_rss_bytes,
            "threads": self.threads,
            "workers": self.workers,
            "precision": self.precision,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Precision:
    """The precision a model's stages load at and why, with what the quality gate let its voice
    approximate there (e.g. a VITS decoder's `context_frames`). Deciding it may read the gate's
    verdict from disk: a voice decides it once as it loads and passes it to each stage's load."""

    name: str
    reason: str
    approximations: Mapping[str, Any] = field(default_factory=dict)


class Stage(ABC):
    """One model graph, ready to run. Thread safe: overlapping runs are served by the backend's
    parallel workers, or wait for one."""

    report: StageReport
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # The largest value of each named dimension this stage runs (an engine's profile), so that a
    # voice can cut its work to fit; empty: no limit.
    limits: Mapping[str, int] = MappingProxyType({})

    @abstractmethod
    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run the graph on named inputs; returns the outputs in graph order."""

    def run_kept(self, feeds: Mapping[str, Any], keep: Collection[str]) -> list[Any]:
        """As `run`, but the outputs named in `keep` may stay where the backend holds them (on
        its device): opaque values, only to be fed back into this stage. A decoding loop's KV
        cache goes round so without a host copy each step. Here: plain `run`."""
        return self.run(feeds)

    def input_names(self) -> set[str]:
        return {spec.name for spec in self.inputs}


class Backend(ABC):
    name: ClassVar[str]
    workers: int = 1  # runs each stage serves at once

    @abstractmethod
    def load(
        self, model_path: Path, stage: str, part: str = WHOLE, precision: Precision | None = None
    ) -> Stage:
        """Load one stage (or a built part of its graph); raises BackendError on failure.
        `precision`: as `precision_for` decided it for the voice (None: decided now)."""

    def request(self) -> AbstractContextManager[None]:
        """Held while one request is in progress: backends that share the cores between
        concurrent requests size each run by how many there are."""
        return nullcontext()

    def has_part(self, model_path: Path, part: str, precision: Precision | None = None) -> bool:
        """Whether `fastvoice build` made `part` of this model for this backend (at `precision`,
        as for `load`)."""
        return False

    def precision_for(self, model_path: Path) -> Precision | None:
        """The precision this model's stages load at, for a voice to decide once and pass to
        `has_part` and `load`; None where each stage's own settings decide (a GPU's config)."""
        return None

    def gpu_report(self) -> dict[str, Any] | None:
        """The GPU stack found, the VRAM budget and its decisions (status/info); None on CPU."""
        return None

    def gpu_memory(self) -> dict[str, int] | None:
        """GPU memory in use now, read through NVML (stats); None where there is none."""
        return None
