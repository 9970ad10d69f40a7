"""MkDocs hook: the configuration reference, written from the config models at every build, so
the page says exactly what `fastvoice config check` accepts (keys, types, defaults, limits).

The models are read from this checkout (put on the path here), so a build needs mkdocs-material
and pydantic, not fastvoice installed."""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

MARKER = "<!-- config-reference -->"
CHECKOUT = Path(__file__).resolve().parent.parent


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds (a model, an optional one, a union of them)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for argument in typing.get_args(annotation):
        found += _models_in(argument)
    return found


def _container(annotation: Any) -> tuple[str, Any] | None:
    """("dict", value type) or ("list", item type) for mappings and lists of models."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is dict and _models_in(arguments[1]):
        return "dict", arguments[1]
    if origin is list and arguments and _models_in(arguments[0]):
        return "list", arguments[0]
    return None


def _type_name(annotation: Any) -> str:
    """A reader's name for a type: `int | null`, `one of 'auto', 'fp32'`."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(arguments[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(value) for value in arguments)
    if origin in (types.UnionType, typing.Union):
        return " | ".join(_type_name(argument) for argument in arguments)
    if origin in (list, dict):
        return f"{origin.__name__} of " + ", ".join(_type_name(a) for a in arguments)
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: Any) -> str:
    if info.default is PydanticUndefined:
        if info.default_factory is None:
            return "(required)"
        value = info.default_factory()
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(section)"
    try:
        return "`" + json.dumps(value, default=str) + "`"
    except TypeError:
        return f"`{value}`"


def _limits(info: Any) -> str:
    bounds = []
    for item in info.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(item, name, None) is not None:
                bounds.append(f"{sign} {getattr(item, name)}")
    return f" ({', '.join(bounds)})" if bounds else ""


def rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key path, type, default, meaning) for every key under `model`."""
    found = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        container = _container(annotation)
        models = _models_in(annotation)
        if container is not None:
            kind, inner = container
            step = ".NAME." if kind == "dict" else "[]."
            for sub in _models_in(inner):
                found += rows(sub, f"{key}{step}")
            continue
        if models:  # a section, or an optional one (e.g. mqtt.tls)
            found += rows(models[0], f"{key}.")
            continue
        meaning = (info.description or "") + _limits(info)
        found.append((key, _type_name(annotation), _default(info), meaning))
    merged: dict[str, tuple[str, str, str, str]] = {}
    for key, kind, default, meaning in found:  # a key several voice families share
        if key in merged and kind not in merged[key][1]:
            known = merged[key]
            merged[key] = (key, f"{known[1]} or {kind}", known[2], known[3] or meaning)
        else:
            merged.setdefault(key, (key, kind, default, meaning))
    return list(merged.values())


def reference() -> str:
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    from daemon.config import Config

    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, kind, default, meaning in rows(Config):
        cells = [f"`{key}`", kind.replace("|", "\\|"), default.replace("|", "\\|"), meaning]
        lines.append("| " + " | ".join(cell.replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
