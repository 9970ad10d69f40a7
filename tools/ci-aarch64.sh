#!/usr/bin/env bash
# CI's aarch64 stage (Jetson Orin, Raspberry Pi 5): an arm64 Debian root run under QEMU user
# emulation, with no compiler in it, installs this checkout's last commit the way the README
# installs a box (a venv, `pip install '.[cpu,kokoro]'`, from wheels), then speaks with the
# embedded voice, installs and speaks a Kokoro voice, runs `doctor` and has the service take one
# MQTT job. Emulation is 10-30x slower than the host: what runs there is small, builds are exact
# (fp32, no precision gate: the gate's choices per CPU class are tested on the host), and the
# Kokoro voice is installed without its build (its loudness measurement alone took 9 minutes
# emulated): it loads and speaks its graph as published.
#
# Needs root, qemu-user-static, binfmt-support and mmdebstrap (Debian's packages; installed here
# when missing). Kept in $FASTVOICE_CI_CACHE (default /var/cache/fastvoice-ci) between runs: the
# root (made from Debian's arm64 packages, about 5 minutes), pip's downloads, and the venv once
# its install went through (keyed by pyproject.toml: the README's install command then runs on it
# as an upgrade does, fastvoice itself installed anew, and a change of dependencies starts a new
# venv).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${FASTVOICE_CI_CACHE:-/var/cache/fastvoice-ci}"
packages="python3,python3-venv,libportaudio2,mosquitto,ca-certificates"
root_tar="$cache/arm64-bookworm-$(echo "$packages" | md5sum | cut -c1-8).tar"
started=$SECONDS

missing=()
for package in qemu-user-static binfmt-support mmdebstrap; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    # CI runs this stage beside the test setup, which may hold apt's lock: wait for it.
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    "${apt[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    echo "ci-aarch64: QEMU's aarch64 binfmt handler is not registered" >&2
    exit 1
fi

mkdir -p "$cache/pip-arm64"
if [ ! -s "$root_tar" ]; then
    # The host's own Debian sources: the same archive its packages come from (a Debian 12 host;
    # the root is bookworm whatever the host runs).
    sources=(/etc/apt/sources.list.d/debian.sources /etc/apt/sources.list)
    existing=()
    for file in "${sources[@]}"; do
        if [ -s "$file" ]; then existing+=("$file"); fi
    done
    if [ "${#existing[@]}" -eq 0 ]; then
        echo "ci-aarch64: no Debian sources on this host to make the root from" >&2
        exit 1
    fi
    mmdebstrap --quiet --architectures=arm64 --variant=minbase --include="$packages" \
        --format=tar bookworm "$root_tar.part" "${existing[@]}"
    mv "$root_tar.part" "$root_tar"
    date +%s > "$root_tar.key"  # a new root: venvs made in the last one do not fit it
fi
echo "ci-aarch64: arm64 root ready in $((SECONDS - started)) s"
venv_tar="$cache/arm64-venv-$(cat pyproject.toml "$root_tar.key" | md5sum | cut -c1-8).tar"

root="$(mktemp -d)"
cleanup() {
    set +e  # every step of the cleanup runs, whatever one of them says
    # The venv is kept once its install went through, whatever came after.
    if [ ! -s "$venv_tar" ] && [ -e "$root/opt/fastvoice/.venv/installed" ]; then
        tar -cf "$venv_tar.part" -C "$root" opt/fastvoice/.venv && mv "$venv_tar.part" "$venv_tar"
    fi
    for mounted in "$root/var/cache/pip" "$root/proc" "$root/dev"; do
        if mountpoint -q "$mounted"; then umount -l "$mounted"; fi
    done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT
tar -xf "$root_tar" -C "$root"
if [ -s "$venv_tar" ]; then
    tar -xf "$venv_tar" -C "$root"
fi
mkdir -p "$root/src/fastvoice" "$root/var/cache/pip"
git archive HEAD | tar -x -C "$root/src/fastvoice"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's CA bundle: the registries are reached as the host reaches them.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/host-ca-certificates.crt"
mount --bind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount --bind "$cache/pip-arm64" "$root/var/cache/pip"

chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt PIP_CACHE_DIR=/var/cache/pip \
    PIP_DISABLE_PIP_VERSION_CHECK=1 /bin/bash -euo pipefail -s <<'INSIDE'
step() { echo "ci-aarch64: $1 ($(( $(date +%s) - begun )) s)"; }
begun=$(date +%s)
test "$(uname -m)" = aarch64
for compiler in cc gcc c++ clang; do
    if command -v "$compiler" >/dev/null; then echo "a compiler is in the root: $compiler"; exit 1; fi
done
test -d /opt/fastvoice/.venv || python3 -m venv /opt/fastvoice/.venv
/opt/fastvoice/.venv/bin/pip install -q '/src/fastvoice[cpu,kokoro]'
touch /opt/fastvoice/.venv/installed
fastvoice=/opt/fastvoice/.venv/bin/fastvoice
step "installed from wheels"

# A free port of the host's (the root shares its network): other brokers may be running.
port=$(/opt/fastvoice/.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p /etc/fastvoice /var/lib/fastvoice/out
cat > /etc/mosquitto/ci.conf <<EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
EOF
cat > /etc/fastvoice/fastvoice.yaml <<EOF
version: 1
runtime: {precision: exact}
audio: {device: none, file_dir: /var/lib/fastvoice/out}
mqtt: {host: 127.0.0.1, port: $port, base_topic: fastvoice/arm}
EOF
export FASTVOICE_CONFIG=/etc/fastvoice/fastvoice.yaml

"$fastvoice" say "Hello from an arm box." -o /tmp/hello.wav
step "the embedded voice spoke"

mosquitto -c /etc/mosquitto/ci.conf &
broker=$!
"$fastvoice" serve &
service=$!
stop_all() {  # the service and the broker end before the root is taken down
    kill "$service" "$broker" 2>/dev/null || true
    wait "$service" "$broker" 2>/dev/null || true
}
trap stop_all EXIT
# Ready when its retained status says online (it subscribes to its topics before saying so).
/opt/fastvoice/.venv/bin/python - "$port" <<'EOF'
import sys
import threading

import paho.mqtt.client as mqtt

online = threading.Event()
client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
client.on_connect = lambda c, *_: c.subscribe("fastvoice/arm/status")
client.on_message = lambda _c, _u, message: message.payload == b"online" and online.set()
client.connect("127.0.0.1", int(sys.argv[1]))
client.loop_start()
if not online.wait(600):
    sys.exit("the service did not come online in 600 s")
client.loop_stop()
EOF
"$fastvoice" doctor
step "doctor passed"
"$fastvoice" send "One job over MQTT." --id arm-job --timeout 600 | tee /tmp/events.txt
grep -q finished /tmp/events.txt
test -s /var/lib/fastvoice/out/arm-job.wav
kill -TERM "$service"
wait "$service"
kill "$broker"
step "the service took one MQTT job"
"$fastvoice" voices install --no-build ja_JP-kokoro-jf_alpha
"$fastvoice" say --voice ja_JP-kokoro-jf_alpha "三番線に電車が参ります。" -o /tmp/kokoro.wav
step "a Kokoro voice installed and spoke"

/opt/fastvoice/.venv/bin/python - <<'EOF'
import wave

for path in ("/tmp/hello.wav", "/tmp/kokoro.wav", "/var/lib/fastvoice/out/arm-job.wav"):
    with wave.open(path) as wav:
        seconds = wav.getnframes() / wav.getframerate()
    assert seconds > 0.8, f"{path}: {seconds:.2f} s"
    print(f"ci-aarch64: {path}: {seconds:.2f} s of audio")
EOF
INSIDE
echo "ci-aarch64: passed in $((SECONDS - started)) s"
