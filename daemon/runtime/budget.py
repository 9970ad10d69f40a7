"""The GPU memory budget: what each stage may take before it loads, and what happens when a run
meets an out-of-memory error anyway.

The ledger counts, per stage: its weights, its I/O buffers per lane, and the execution memory
of one run. Lanes (one per concurrent run) each own one scratch block that every stage's context
in that lane shares, since one lane runs one stage at a time; so a stage adds only what its
execution memory exceeds the largest block already planned, once per lane. ONNX Runtime GPU
sessions are given an arena limit, which the ledger counts whole. A stage that does not fit at
its largest profile tries the smaller ones its engine was built with; a stage that fits at none
goes to the next backend. Every decision is kept, with its figures, for logs and `status/info`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daemon.errors import BackendError

log = logging.getLogger(__name__)
MB = 2**20


def mb(value: int) -> str:
    return f"{value / MB:.1f} MB"


@dataclass(frozen=True)
class ProfileCost:
    """One optimisation profile of an engine, with what a context at it needs on the device."""

    index: int
    max_dims: Mapping[str, int]  # named dynamic dimension -> its largest value
    execution_bytes: int  # the context's device memory at this profile
    io_bytes: int  # input and output buffers at this profile's largest shapes


@dataclass(frozen=True)
class Decision:
    stage: str
    backend: str
    reason: str
    profile: int | None = None
    bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "backend": self.backend,
            "profile": self.profile,
            "bytes": self.bytes,
            "reason": self.reason,
        }


@dataclass
class VramLedger:
    """What the loaded stages take out of `budget_bytes`, for `lanes` concurrent runs."""

    budget_bytes: int
    lanes: int
    weights_bytes: int = 0
    io_bytes: int = 0  # all lanes
    arena_bytes: int = 0  # ONNX Runtime arena limits
    scratch_bytes: int = 0  # one lane's shared execution block
    decisions: list[Decision] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def committed_bytes(self) -> int:
        held = self.weights_bytes + self.io_bytes + self.arena_bytes
        return held + self.lanes * self.scratch_bytes

    @property
    def free_bytes(self) -> int:
        return self.budget_bytes - self.committed_bytes

    def engine_cost(self, weights_bytes: int, profile: ProfileCost) -> int:
        """What loading an engine at `profile` adds to the committed total."""
        growth = max(0, profile.execution_bytes - self.scratch_bytes)
        return weights_bytes + self.lanes * (profile.io_bytes + growth)

    def place_engine(
        self, stage: str, weights_bytes: int, profiles: list[ProfileCost]
    ) -> ProfileCost | None:
        """The largest profile that fits what is left (committed), or None: the stage goes to
        the next backend. `profiles` is ordered largest first."""
        with self._lock:
            tried = []
            for profile in profiles:
                cost = self.engine_cost(weights_bytes, profile)
                if cost <= self.free_bytes:
                    self.weights_bytes += weights_bytes
                    self.io_bytes += self.lanes * profile.io_bytes
                    self.scratch_bytes = max(self.scratch_bytes, profile.execution_bytes)
                    shrunk = f", after {'; '.join(tried)}" if tried else ""
                    self._decide(
                        Decision(
                            stage,
                            "trt",
                            f"profile {profile.index} ({_dims(profile)}) needs {mb(cost)}, "
                            f"{mb(self.free_bytes + cost)} of the budget was free{shrunk}",
                            profile.index,
                            cost,
                        )
                    )
                    return profile
                tried.append(f"profile {profile.index} ({_dims(profile)}) needs {mb(cost)}")
            self._decide(
                Decision(
                    stage,
                    "next",
                    f"no profile fits the {mb(self.free_bytes)} left of the "
                    f"{mb(self.budget_bytes)} budget ({'; '.join(tried) or 'no profiles'})",
                )
            )
            return None

    def place_arena(self, stage: str, backend: str, weights_bytes: int) -> int | None:
        """An arena limit for an ONNX Runtime GPU session: half of what is left (so a later
        stage still finds room), at least twice the weights; None when that does not fit."""
        with self._lock:
            limit = max(self.free_bytes // 2, 2 * weights_bytes)
            if limit > self.free_bytes:
                self._decide(
                    Decision(
                        stage,
                        "next",
                        f"{backend} needs at least {mb(2 * weights_bytes)} (twice the weights), "
                        f"{mb(self.free_bytes)} of the {mb(self.budget_bytes)} budget is left",
                    )
                )
                return None
            self.arena_bytes += limit
            self._decide(
                Decision(
                    stage,
                    backend,
                    f"arena limited to {mb(limit)} (half of what was left)",
                    None,
                    limit,
                )
            )
            return limit

    def release_arena(self, stage: str, limit: int) -> None:
        """A session that failed to load gives its arena back."""
        with self._lock:
            self.arena_bytes -= limit
            self._decide(Decision(stage, "next", f"arena of {mb(limit)} given back: load failed"))

    def note(self, decision: Decision) -> None:
        with self._lock:
            self._decide(decision)

    def _decide(self, decision: Decision) -> None:
        log.info("budget: %s -> %s: %s", decision.stage, decision.backend, decision.reason)
        self.decisions.append(decision)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "budget_bytes": self.budget_bytes,
                "committed_bytes": self.committed_bytes,
                "lanes": self.lanes,
                "weights_bytes": self.weights_bytes,
                "io_bytes": self.io_bytes,
                "arena_bytes": self.arena_bytes,
                "scratch_bytes_per_lane": self.scratch_bytes,
                "decisions": [decision.as_dict() for decision in self.decisions],
            }


def _dims(profile: ProfileCost) -> str:
    return ", ".join(f"{name} <= {value}" for name, value in sorted(profile.max_dims.items()))


class GpuOutOfMemory(BackendError):
    """A run could not get the device memory it needed."""


Run = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]


def run_halving(run: Run, feeds: Mapping[str, np.ndarray], batched: set[str], stage: str):
    """`run(feeds)`; on GpuOutOfMemory, the batch (axis 0 of the `batched` inputs) is halved and
    each half run on its own, down to one item, whose failure is the caller's error to report.
    Outputs are joined along axis 0 again."""
    try:
        return run(feeds)
    except GpuOutOfMemory as error:
        size = min((feeds[name].shape[0] for name in batched if name in feeds), default=1)
        if size <= 1:
            raise GpuOutOfMemory(f"{stage}: out of GPU memory at batch 1: {error}") from error
        half = size // 2
        log.warning(
            "%s: out of GPU memory at batch %d, retrying as %d + %d", stage, size, half, size - half
        )
        parts = [
            run_halving(run, _slice(feeds, batched, part), batched, stage)
            for part in (slice(0, half), slice(half, size))
        ]
        return [np.concatenate(outputs, axis=0) for outputs in zip(*parts, strict=True)]


def _slice(
    feeds: Mapping[str, np.ndarray], batched: set[str], part: slice
) -> dict[str, np.ndarray]:
    return {name: value[part] if name in batched else value for name, value in feeds.items()}
