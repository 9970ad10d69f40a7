"""ONNX Runtime runs whose chosen outputs stay where the session made them (as OrtValues), so
that a caller feeding them back, as the CosyVoice 2 LLM does its KV cache every step, does not
copy them through host numpy arrays each time."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np


def run_keeping(
    session,
    feeds: Mapping[str, Any],
    keep: Collection[str],
    device: str = "cpu",
    device_id: int = 0,
) -> list[Any]:
    """Runs `session`; outputs named in `keep` come back as OrtValues, the rest as numpy.
    Feeds may be numpy arrays or OrtValues from an earlier run."""
    import onnxruntime as ort

    values = {
        name: value
        if isinstance(value, ort.OrtValue)
        else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value), device, device_id)
        for name, value in feeds.items()
    }
    outputs = session.run_with_ort_values(None, values)
    names = [spec.name for spec in session.get_outputs()]
    return [
        value if name in keep else value.numpy() for name, value in zip(names, outputs, strict=True)
    ]
