"""ONNX Runtime runs whose chosen outputs stay on the session's device (as OrtValues), so that a
caller feeding them back, as the CosyVoice 2 LLM does its KV cache every step, does not copy
them through host memory each time. Outputs are bound with IOBinding: without it ONNX Runtime
returns every output in host memory."""

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
    """Runs `session`; outputs named in `keep` come back as OrtValues on `device` (ONNX
    Runtime's name: "cpu", "cuda"), the rest as numpy. Feeds may be numpy arrays or OrtValues
    from an earlier run (used where they are, no copy)."""
    import onnxruntime as ort

    binding = session.io_binding()
    for name, value in feeds.items():
        if isinstance(value, ort.OrtValue):
            binding.bind_ortvalue_input(name, value)
        else:
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
    names = [spec.name for spec in session.get_outputs()]
    for name in names:
        if name in keep:
            binding.bind_output(name, device, device_id)
        else:
            binding.bind_output(name, "cpu")
    session.run_with_iobinding(binding)
    outputs = binding.get_outputs()
    return [
        value if name in keep else value.numpy() for name, value in zip(names, outputs, strict=True)
    ]
