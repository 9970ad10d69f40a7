#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for development and tests: system packages, then .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
# pulseaudio + libasound2-plugins: a sound server to kill mid-playback (tests/test_faults.py).
# chromium + chromium-driver: the operator page in a real browser (tests/test_operator_page.py).
for package in libportaudio2 mosquitto mosquitto-clients openssl systemd pulseaudio \
    libasound2-plugins chromium chromium-driver; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt=(apt-get -o DPkg::Lock::Timeout=600)  # CI's aarch64 stage may hold apt's lock
    $SUDO "${apt[@]}" update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends \
        "${missing[@]}"
fi

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[cpu,test,kokoro]'
# An editable install leaves our modules uncompiled; where bytecode is never written
# (PYTHONDONTWRITEBYTECODE, a read-only install) every start would compile them again.
.venv/bin/python -m compileall -q daemon edge_build
# Rhasspy's Hermes message classes for the Hermes tests; its paho-mqtt 1.x pin would replace ours.
.venv/bin/pip install -q --no-deps 'rhasspy-hermes==0.6.2'
