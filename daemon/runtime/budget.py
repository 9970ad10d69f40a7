"""The GPU memory budget: what each stage may take before it loads, and what happens when a run
meets an out-of-memory error anyway.

The ledger counts, per stage: its weights, its I/O buffers per lane, and the execution memory
of one run. Lanes (one per concurrent run) each own one scratch block that every stage's context
in that lane shares, since one lane runs one stage at a time; so a stage adds only what its
execution memory exceeds the largest block already planned, once per lane. ONNX Runtime GPU
sessions are given an arena limit, which the ledger counts whole. A stage that does not fit at
its largest profile tries the smaller ones its engine was built with; a stage that fits at none
goes to the next backend. Memory that is no stage's engine or arena (the CUDA context, the engines
ONNX Runtime's TensorRT provider builds) is reserved at an estimate and settled to what was
measured once it exists. Every decision is kept, with its figures, for logs and `status/info`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daemon.errors import GpuOutOfMemory

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


@dataclass(frozen=True)
class Placement:
    """What one loaded stage holds on the device."""

    weights_bytes: int = 0
    io_bytes_per_lane: int = 0
    execution_bytes: int = 0  # its share comes out of each lane's one scratch block
    arena_bytes: int = 0  # an ONNX Runtime session's arena limit
    held_bytes: int = 0  # fixed memory: the CUDA context, ort-trt's engines


@dataclass
class VramLedger:
    """What the loaded stages take out of `budget_bytes`, for `lanes` concurrent runs."""

    budget_bytes: int
    lanes: int
    placements: dict[str, Placement] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def _total(self, placements: list[Placement]) -> int:
        held = sum(
            p.weights_bytes + self.lanes * p.io_bytes_per_lane + p.arena_bytes + p.held_bytes
            for p in placements
        )
        return held + self.lanes * self._scratch(placements)

    @staticmethod
    def _scratch(placements: list[Placement]) -> int:
        return max((p.execution_bytes for p in placements), default=0)

    @property
    def scratch_bytes(self) -> int:
        """One lane's scratch block: the largest execution memory of any loaded stage."""
        with self._lock:
            return self._scratch(list(self.placements.values()))

    @property
    def committed_bytes(self) -> int:
        with self._lock:
            return self._total(list(self.placements.values()))

    @property
    def free_bytes(self) -> int:
        return self.budget_bytes - self.committed_bytes

    def cost(self, placement: Placement) -> int:
        """What adding `placement` adds to the committed total."""
        with self._lock:
            held = list(self.placements.values())
            return self._total([*held, placement]) - self._total(held)

    def place_engine(
        self, stage: str, weights_bytes: int, profiles: list[ProfileCost]
    ) -> ProfileCost | None:
        """The largest profile that fits what is left, or None: the stage goes to the next
        backend. `profiles` is ordered largest first."""
        with self._lock:
            tried = []
            free = self.free_bytes
            for profile in profiles:
                placement = Placement(weights_bytes, profile.io_bytes, profile.execution_bytes)
                cost = self.cost(placement)
                if cost <= free:
                    self.placements[stage] = placement
                    shrunk = f", after {'; '.join(tried)}" if tried else ""
                    self._decide(
                        Decision(
                            stage,
                            "trt",
                            f"profile {profile.index} ({_dims(profile)}) needs {mb(cost)}, "
                            f"{mb(free)} of the budget was free{shrunk}",
                            profile.index,
                            cost,
                        )
                    )
                    return profile
                tried.append(f"profile {profile.index} ({_dims(profile)}) needs {mb(cost)}")
            tried_text = "; ".join(tried) or "no profiles"
            self._refuse(stage, f"no profile fits the {self._left(free)} ({tried_text})")
            return None

    def place_arena(self, stage: str, backend: str, weights_bytes: int) -> int | None:
        """An arena limit for an ONNX Runtime GPU session: half of what is left (so a later
        stage still finds room), at least twice the weights; None when that does not fit."""
        with self._lock:
            free = self.free_bytes
            limit = max(free // 2, 2 * weights_bytes)
            if limit > free:
                needs = f"{backend} needs at least {mb(2 * weights_bytes)} (twice the weights)"
                self._refuse(stage, f"{needs}, {self._left(free)}")
                return None
            self.placements[stage] = Placement(arena_bytes=limit)
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

    def reserve(self, stage: str, backend: str, held_bytes: int, reason: str) -> bool:
        """Fixed memory set aside at an estimate; False, and nothing held, when it does not fit."""
        with self._lock:
            free = self.free_bytes
            if held_bytes > free:
                too_big = f"{reason}: {mb(held_bytes)} does not fit the {self._left(free)}"
                self._refuse(stage, too_big)
                return False
            self.placements[stage] = Placement(held_bytes=held_bytes)
            self._decide(Decision(stage, backend, f"{mb(held_bytes)} {reason}", None, held_bytes))
            return True

    def settle(self, stage: str, backend: str, measured_bytes: int, how: str) -> bool:
        """A reservation replaced by what was measured (it is on the device whatever the budget
        says); False when the budget no longer holds everything placed."""
        with self._lock:
            self.placements[stage] = Placement(held_bytes=measured_bytes)
            fits = self.committed_bytes <= self.budget_bytes
            over = "" if fits else f", {mb(-self.free_bytes)} over the budget"
            self._decide(
                Decision(stage, backend, f"{mb(measured_bytes)} {how}{over}", None, measured_bytes)
            )
            return fits

    def release(self, stage: str, why: str) -> None:
        """A stage that failed to load after it was placed gives its share back."""
        with self._lock:
            placement = self.placements.pop(stage, None)
            if placement is not None:
                self._refuse(stage, f"its share given back: {why}")

    def _left(self, free: int) -> str:
        return f"{mb(free)} left of the {mb(self.budget_bytes)} budget"

    def _refuse(self, stage: str, why: str) -> None:
        """The stage goes to the next backend (the lock is held)."""
        self._decide(Decision(stage, "next", why))

    def note(self, decision: Decision) -> None:
        with self._lock:
            self._decide(decision)

    def _decide(self, decision: Decision) -> None:
        log.info("budget: %s -> %s: %s", decision.stage, decision.backend, decision.reason)
        self.decisions.append(decision)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            placements = list(self.placements.values())
            return {
                "budget_bytes": self.budget_bytes,
                "committed_bytes": self._total(placements),
                "lanes": self.lanes,
                "weights_bytes": sum(p.weights_bytes for p in placements),
                "io_bytes": self.lanes * sum(p.io_bytes_per_lane for p in placements),
                "arena_bytes": sum(p.arena_bytes for p in placements),
                "held_bytes": sum(p.held_bytes for p in placements),
                "scratch_bytes_per_lane": self._scratch(placements),
                "decisions": [decision.as_dict() for decision in self.decisions],
            }


def _dims(profile: ProfileCost) -> str:
    return ", ".join(f"{name} <= {value}" for name, value in sorted(profile.max_dims.items()))


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
