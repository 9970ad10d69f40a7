#!/usr/bin/env bash
# A GPU box (x86 with an RTX card, or a Jetson): the virtual environment with the GPU runtime.
# piper-tts (the phonemizer) pulls in the CPU onnxruntime, which must never sit beside
# onnxruntime-gpu (both install the same `onnxruntime` module): it is removed and onnxruntime-gpu
# reinstalled over it. On a Jetson, pass the path or URL of NVIDIA's onnxruntime-gpu wheel for
# your JetPack; TensorRT comes from JetPack (the venv sees it through system site packages).
#   bash tools/install-gpu.sh                       # x86 + RTX: TensorRT from pip
#   bash tools/install-gpu.sh --jetson WHEEL        # Jetson: JetPack's TensorRT
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--jetson" ]; then
  wheel=${2:?"give NVIDIA's onnxruntime-gpu wheel for this JetPack"}
  python3 -m venv --system-site-packages .venv
  .venv/bin/pip install -e '.[jetson]'
  .venv/bin/pip uninstall -y onnxruntime
  .venv/bin/pip install --force-reinstall --no-deps "$wheel"
else
  python3 -m venv .venv
  .venv/bin/pip install -e '.[gpu]'
  .venv/bin/pip uninstall -y onnxruntime onnxruntime-gpu
  .venv/bin/pip install --no-deps "onnxruntime-gpu>=1.18,<2"
fi
.venv/bin/python - <<'PY'
import json
import onnxruntime
from daemon.runtime.gpu import probe
stack = probe(0)
print(json.dumps(stack.as_dict(), indent=2))
if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
    raise SystemExit("onnxruntime has no CUDAExecutionProvider: check CUDA and cuDNN")
if not stack.engines_possible:
    print("no TensorRT engines on this box:", stack.tensorrt_problem or stack.cuda_python_problem)
PY
echo "next: .venv/bin/fastvoice build   (TensorRT engines: minutes on a Jetson)"
