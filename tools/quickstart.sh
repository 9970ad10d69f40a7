#!/usr/bin/env bash
# One command on a fresh machine: install fastvoice in .venv and speak with the embedded voice.
# With no sound device it writes hello.wav instead.
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT="${1:-Hello. This is fastvoice, speaking offline with its embedded voice.}"

# Debian and Ubuntu ship python3 without venv (python3-venv) and PortAudio (libportaudio2).
missing=()
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
dpkg -s libportaudio2 >/dev/null 2>&1 || missing+=(libportaudio2)
if [ "${#missing[@]}" -gt 0 ] && command -v apt-get >/dev/null; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    # A fresh box's automatic upgrades may hold apt's lock: wait for it.
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    $SUDO "${apt[@]}" update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive \
        "${apt[@]}" install -y -qq "${missing[@]}" || echo "could not install ${missing[*]}"
fi
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[cpu]'
# An editable install leaves our modules uncompiled; where bytecode is never written
# (PYTHONDONTWRITEBYTECODE, a read-only install) every start would compile them again.
.venv/bin/python -m compileall -q daemon edge_build
.venv/bin/fastvoice build   # once per box: optimised graphs, streaming inside sentences

if .venv/bin/fastvoice devices >/dev/null 2>&1; then
    .venv/bin/fastvoice say "$TEXT"
else
    .venv/bin/fastvoice say "$TEXT" -o hello.wav
    echo "no sound device here: wrote $(pwd)/hello.wav"
fi
