"""Pydantic validation errors as one line per problem: 'key.path: what is wrong with the value'.

Shared by the config file and by MQTT payloads, so both speak the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def _describe(error: dict[str, Any], noun: str) -> str:
    """One line per error: 'key.path: value is wrong because ...'. A union member's tag
    ('<name>') is not a key the user wrote: it is left out of the path."""
    parts = [str(part) or '""' for part in error["loc"]]  # a key with an empty name shows as ""
    path = ".".join(part for part in parts if not part.startswith("<")) or "(top level)"
    kind = error["type"]
    ctx = error.get("ctx", {})
    value = error.get("input")
    if kind == "extra_forbidden":
        return f"{path}: unknown {noun}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind in ("less_than_equal", "less_than"):
        limit = ctx.get("le", ctx.get("lt"))
        return f"{path}: {value!r} is above the maximum {limit}"
    if kind in ("greater_than_equal", "greater_than"):
        limit = ctx.get("ge", ctx.get("gt"))
        word = "minimum" if kind == "greater_than_equal" else "limit (must be above)"
        return f"{path}: {value!r} is below the {word} {limit}"
    if kind == "literal_error":
        return f"{path}: {value!r} is not one of {ctx.get('expected')}"
    if kind == "value_error":
        return f"{path}: {error['msg'].removeprefix('Value error, ')}"
    return f"{path}: {value!r}: {error['msg']}"


def format_validation_error(error: ValidationError, noun: str = "key") -> str:
    """`noun` names what an unknown entry is: a config `key`, a payload `field`."""
    lines: list[str] = []
    for item in error.errors():
        line = _describe(dict(item), noun)
        if line not in lines:
            lines.append(line)
    return "\n".join(lines)
