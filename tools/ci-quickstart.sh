#!/usr/bin/env bash
# CI's check of the README's quick start: `bash tools/quickstart.sh` in a fresh clone of this
# checkout's last commit, with a home, cache and pip cache of its own (nothing a test setup
# installed can help it), on a machine with no sound device. Fails unless it wrote hello.wav
# holding speech.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git clone --quiet . "$scratch/fastvoice"
mkdir -p "$scratch/home"
started=$SECONDS
(
    cd "$scratch/fastvoice"
    unset VIRTUAL_ENV PYTHONPATH XDG_CONFIG_HOME XDG_CACHE_HOME XDG_STATE_HOME XDG_DATA_HOME
    export HOME="$scratch/home" XDG_RUNTIME_DIR="$scratch/home/run" PIP_NO_CACHE_DIR=1
    bash tools/quickstart.sh
)
wav="$scratch/fastvoice/hello.wav"
if [ ! -s "$wav" ]; then
    echo "ci-quickstart: the quick start wrote no hello.wav" >&2
    exit 1
fi
"$scratch/fastvoice/.venv/bin/python" - "$wav" <<'EOF'
import sys
import wave

import numpy as np

with wave.open(sys.argv[1]) as wav:
    seconds = wav.getnframes() / wav.getframerate()
    samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
peak = int(np.abs(samples).max()) if samples.size else 0
if seconds < 1.0 or peak < 1000:
    sys.exit(f"ci-quickstart: hello.wav is not speech ({seconds:.2f} s, peak {peak})")
print(f"ci-quickstart: hello.wav holds {seconds:.2f} s of speech")
EOF
echo "ci-quickstart: the quick start passed in $((SECONDS - started)) s"
