#!/usr/bin/env bash
# The export environment (.venv-export): fastvoice with PyTorch and the CosyVoice 2 model classes,
# for `fastvoice export` and the export parity tests. Kept apart from .venv: an appliance never
# loads PyTorch, and cosyvoice-minicpmo's own requirements would pull a CUDA PyTorch of several
# GB, so it is installed without them and the few it needs are pinned here (transformers 5
# breaks CosyVoice's one-step decoding). Needs tools/setup-dev.sh's system packages.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-export
.venv-export/bin/pip install --quiet --upgrade pip
.venv-export/bin/pip install --quiet 'torch==2.13.0'
.venv-export/bin/pip install --quiet -e '.[cpu,export,test]'
.venv-export/bin/pip install --quiet --no-deps 'cosyvoice-minicpmo==0.1.0'
.venv-export/bin/pip install --quiet 'transformers==4.51.3' 'diffusers==0.29.0' \
    'conformer==0.3.2' einops omegaconf scipy
