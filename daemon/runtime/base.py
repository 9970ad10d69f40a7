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
    def load(self, model_path: Path, stage: str, part: str = WHOLE) -> Stage:
        """Load one stage (or a built part of its graph); raises BackendError on failure."""

    def request(self) -> AbstractContextManager[None]:
        """Held while one request is in progress: backends that share the cores between
        concurrent requests size each run by how many there are."""
        return nullcontext()

    def has_part(self, model_path: Path, part: str) -> bool:
        """Whether `fastvoice build` made `part` of this model for this backend."""
        return False

    def approximations(self, model_path: Path) -> dict[str, Any]:
        """What the quality gate let a voice of this model approximate on this box (e.g. a VITS
        decoder's `context_frames`); none unless a gate said so."""
        return {}

    def gpu_report(self) -> dict[str, Any] | None:
        """The GPU stack found, the VRAM budget and its decisions (status/info); None on CPU."""
        return None

    def gpu_memory(self) -> dict[str, int] | None:
        """GPU memory in use now, read through NVML (stats); None where there is none."""
        return None
