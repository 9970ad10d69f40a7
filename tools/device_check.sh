#!/usr/bin/env bash
# On a box with an NVIDIA GPU, after tools/install-gpu.sh (nothing more is installed here): what
# the probe finds, every GPU-marked test, then the benchmark on the best backend the box has,
# side by side with stock Piper. Bounded to about 8 minutes; one report file,
# device-check-out/report.md (the raw outputs beside it).
#   bash tools/device_check.sh [--backend trt|ort-trt|ort-cuda|auto] [--vram-budget-mb N]
set -uo pipefail
cd "$(dirname "$0")/.."
out=device-check-out
mkdir -p "$out"
python=.venv/bin/python
report="$out/report.md"

"$python" - > "$out/stack.json" <<'PY'
import json
from daemon.runtime.gpu import probe
print(json.dumps(probe(0).as_dict(), indent=2))
PY
timeout 60 .venv/bin/fastvoice voices --json > "$out/voices.json" 2>&1
# -rs: say why a GPU test skipped (no TensorRT, no cuda-python ...).
timeout 300 .venv/bin/pytest -n 0 -m gpu -v -rs tests/ > "$out/gpu-tests.txt" 2>&1
tests=$?
timeout 180 "$python" tools/bench.py --runs 3 --seconds 3 --max-clients 4 --out "$out/bench" \
    "$@" > "$out/bench.txt" 2>&1
bench=$?

{
    echo "# fastvoice device check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "## GPU stack (probe)"
    echo '```json'
    cat "$out/stack.json"
    echo '```'
    echo
    echo "## GPU tests (exit status $tests; 124 = timed out)"
    echo '```'
    grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$out/gpu-tests.txt"
    echo '```'
    echo
    echo "## Benchmark (exit status $bench; 124 = timed out)"
    if [ -f "$out/bench/bench.md" ]; then cat "$out/bench/bench.md"; else tail -20 "$out/bench.txt"; fi
} > "$report"
echo "report: $report (gpu tests exit status $tests, benchmark $bench)"
exit "$tests"
