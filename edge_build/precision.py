"""Lower-precision copies of a graph (fp16, int8), for the quality gate to accept or refuse.

fp16: every float tensor in half precision, inputs and outputs kept fp32 (casts at the edges),
ops without fp16 kernels left in fp32 (ONNX Runtime's float16 converter's block list).
int8: weights quantized to unsigned 8 bits, activations quantized per run (dynamic
quantization), the only int8 mode that needs no calibration data.
"""

from __future__ import annotations

import logging
from pathlib import Path

from daemon.errors import BackendError

# Ops whose fp16 result overflows or loses everything (large sums, exponentials, powers):
# kept in fp32 in the graphs made for the GPU, where fp16 is what runs.
GPU_FP32_OPS = (
    "Softmax",
    "LayerNormalization",
    "ReduceMean",
    "ReduceSum",
    "Exp",
    "Log",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "Softplus",
    # HiFT: Snake's 1/alpha and sine saturate in fp16; the source's phase is a running sum.
    "Div",
    "Sin",
    "Cos",
    "CumSum",
)


def make_variant(
    graph: Path, precision: str, out: Path, keep_fp32_ops: tuple[str, ...] = ()
) -> Path:
    """Writes `graph` converted to `precision` at `out`; fp16 keeps `keep_fp32_ops` in fp32
    as well as the converter's own block list."""
    import onnx

    try:
        if precision == "fp16":
            from onnxruntime.transformers.float16 import (
                DEFAULT_OP_BLOCK_LIST,
                convert_float_to_float16,
            )

            model = convert_float_to_float16(
                onnx.load(str(graph)),
                keep_io_types=True,
                op_block_list=[*DEFAULT_OP_BLOCK_LIST, *keep_fp32_ops],
            )
            onnx.save(model, str(out))
        elif precision == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quiet = logging.getLogger().level
            logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice goes to root
            try:
                quantize_dynamic(str(graph), str(out), weight_type=QuantType.QUInt8)
            finally:
                logging.getLogger().setLevel(quiet)
        else:
            raise ValueError(f"unknown precision {precision!r}")
    except (ValueError, RuntimeError, onnx.onnx_cpp2py_export.checker.ValidationError) as error:
        raise BackendError(f"cannot convert {graph.name} to {precision}: {error}") from error
    return out
