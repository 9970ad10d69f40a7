"""The parts a model stage is loaded as, and how they are named: a whole graph, or one part of
a split one (a VITS encoder or decoder). Shared by the backends, the voices and `edge_build`."""

from __future__ import annotations

WHOLE = "whole"


def part_label(stage: str, part: str) -> str:
    """A stage's name in reports and logs: the stage, or the stage and its part."""
    return stage if part == WHOLE else f"{stage}/{part}"


def part_kind(kind: str, part: str) -> str:
    """An artifact's kind for a part: the whole graph's kind, or that kind and the part."""
    return kind if part == WHOLE else f"{kind}/{part}"
