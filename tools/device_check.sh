#!/usr/bin/env bash
# On a box with an NVIDIA GPU: the GPU tests, then the benchmark on the best backend the box
# has, side by side with stock Piper. One command; everything lands under device-check-out/.
#   bash tools/device_check.sh [--backend trt|ort-trt|ort-cuda|auto] [--vram-budget-mb N]
set -euo pipefail
cd "$(dirname "$0")/.."
out=device-check-out
mkdir -p "$out"
python=.venv/bin/python
"$python" - <<'PY' | tee "$out/stack.json"
import json
from daemon.runtime.gpu import probe
print(json.dumps(probe(0).as_dict(), indent=2))
PY
.venv/bin/fastvoice voices --json > "$out/voices.json" || true
# -rs: say why a GPU test skipped (no TensorRT, no cuda-python ...).
status=0
.venv/bin/pytest -m gpu -v -rs tests/test_gpu_device.py 2>&1 | tee "$out/gpu-tests.txt" || status=$?
"$python" tools/bench.py --runs 5 --max-clients 8 --out "$out/bench" "$@" 2>&1 | tee "$out/bench.txt"
echo "results in $out/ (gpu tests exit status $status)"
exit "$status"
