"""`fastvoice doctor`: what goes wrong on real boxes, checked one by one, each with its fix.

Every check returns a Finding (ok, warn or fail, what was seen, what to do); one check that
breaks never hides the others. The exit code is 1 when any check fails, so scripts and
provisioning tools can run it (`--json` for them).
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from daemon.config import Config

OK, WARN, FAIL = "ok", "warn", "fail"
DISK_HEADROOM_BYTES = 500_000_000  # a voice (60-120 MB), its artifacts, the phrase cache
MEMORY_HEADROOM_BYTES = 400_000_000  # a service with one voice (about 420 MB RSS measured)
BROKER_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_checks(config: Config | None, config_problem: str | None) -> list[Finding]:
    """All checks; with no valid config, only the config's own finding and what needs none."""
    if config is None:
        return [
            Finding("config", FAIL, config_problem or "no config", "fix the key it names"),
            *_guarded("disk and memory", lambda: _headroom(None)),
        ]
    findings = [Finding("config", OK, config_problem or "valid")]
    checks: list[tuple[str, Callable[[], list[Finding]]]] = [
        ("audio device", lambda: _audio(config)),
        ("broker", lambda: _broker(config)),
        ("voices", lambda: _voices(config)),
        ("disk and memory", lambda: _headroom(config)),
        ("GPU", lambda: _gpu(config)),
        ("clock", lambda: _clock(config)),
    ]
    for name, check in checks:
        findings += _guarded(name, check)
    return findings


def _guarded(name: str, check: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return check()
    except Exception as error:  # a check that breaks is a finding, never the end of the run
        return [Finding(name, FAIL, f"the check itself failed: {error!r}", "run with -v")]


def _audio(config: Config) -> list[Finding]:
    """Opens the configured device and plays 0.1 s of silence through it; with no sound card
    (`device: none`), nothing to open. The folder jobs are also written to takes files."""
    from daemon.audio.player import play_silence
    from daemon.config.audio import NO_DEVICE
    from daemon.errors import AudioDeviceError

    device, file_dir = config.audio.device, config.audio.file_dir
    files = [] if file_dir is None else [_file_dir(file_dir)]
    if device == NO_DEVICE:
        detail = (
            f"none (no sound card): each job the service plays is written to {file_dir} as "
            "<job id>.wav (`fastvoice say` without a service: -o FILE)"
        )
        return [Finding("audio device", OK, detail), *files]
    try:
        target = play_silence(device, config.audio.sample_rate or 22050)
    except AudioDeviceError as error:
        fix = "pick one with `fastvoice devices` (audio.device); the service's user needs the "
        fix += "audio group; a box without speakers: audio.device: none and audio.file_dir, "
        fix += "or publish its audio over MQTT"
        return [Finding("audio device", FAIL, str(error), fix), *files]
    except Exception as error:  # PortAudio's own errors when the device will not open or play
        fix = "is another program holding the device? (fuser -v /dev/snd/*)"
        return [Finding("audio device", FAIL, f"{device or 'default'}: {error}", fix), *files]
    detail = f"{target.name} opened and played at {target.sample_rate} Hz"
    return [Finding("audio device", OK, detail), *files]


def _file_dir(folder: Path) -> Finding:
    """`audio.file_dir` takes a file (one is written there and removed), or can be made: the
    player makes it at the first job."""
    fix = "audio.file_dir: a folder the service's user may write (it is made if missing)"
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # / is there
    if not existing.is_dir():
        return Finding("audio files", FAIL, f"{existing} is not a directory", fix)
    if existing != folder:
        if not os.access(existing, os.W_OK | os.X_OK):
            return Finding("audio files", FAIL, f"{existing} is not writable", fix)
        return Finding(
            "audio files", OK, f"{folder}: not there yet, made at the first job in {existing}"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as error:
        return Finding("audio files", FAIL, f"{folder}: {error.strerror or error}", fix)
    return Finding("audio files", OK, f"{folder}: writable")


def _broker(config: Config) -> list[Finding]:
    """Connects with the configured credentials and TLS, then checks that this box may publish
    and subscribe under its base topic (the ACL): a probe message must come back."""
    from daemon.mqtt.broker import make_client

    settings = config.mqtt
    where = f"{settings.host}:{settings.port}"
    answers: queue.Queue[tuple[str, Any]] = queue.Queue()
    probe_topic = f"{settings.base_topic}/doctor/{uuid.uuid4().hex[:8]}"
    client = make_client(settings, f"fastvoice-doctor-{uuid.uuid4().hex[:8]}", persistent=False)
    client.on_connect = lambda _c, _u, _f, code, _p: answers.put(("connect", code))
    client.on_subscribe = lambda _c, _u, _m, codes, _p: answers.put(("subscribe", codes))
    client.on_message = lambda _c, _u, message: answers.put(("message", message.topic))
    try:
        client.connect(settings.host, settings.port, settings.keepalive_s)
    except OSError as error:
        fix = "is the broker running (systemctl status mosquitto)? mqtt.host and mqtt.port"
        return [Finding("broker", FAIL, f"cannot reach {where}: {error}", fix)]
    except ValueError as error:  # TLS files paho refuses
        return [Finding("broker", FAIL, f"{where}: {error}", "check mqtt.tls")]
    client.loop_start()
    try:
        code = _answer(answers, "connect")
        if code is None:
            return [Finding("broker", FAIL, f"{where} accepted the socket but never answered",
                            "is it an MQTT broker? TLS on a plain port (mqtt.tls)?")]  # fmt: skip
        if code.is_failure:
            fix = (
                "mqtt.username and mqtt.password_file (mosquitto_passwd) or the client certificate"
            )
            return [Finding("broker", FAIL, f"{where} refused the connection: {code}", fix)]
        client.subscribe(probe_topic, qos=1)
        granted = _answer(answers, "subscribe")
        client.publish(probe_topic, b"doctor", qos=1)
        echoed = _answer(answers, "message")
        if (
            granted is None
            or any(getattr(c, "is_failure", False) for c in granted)
            or echoed is None
        ):
            fix = f"let this user read and write {settings.base_topic}/# (config/mosquitto.acl)"
            detail = (
                f"connected to {where}, but a message under {settings.base_topic}/ never came back"
            )
            return [Finding("broker", FAIL, detail, fix)]
    finally:
        client.disconnect()
        client.loop_stop()
    return [Finding("broker", OK, f"{where}: connected, may publish and subscribe under "
                    f"{settings.base_topic}/")]  # fmt: skip


def _answer(answers: queue.Queue, kind: str) -> Any:
    deadline = time.monotonic() + BROKER_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            got, value = answers.get(timeout=left)
        except queue.Empty:
            return None
        if got == kind:
            return value
    return None


def _voices(config: Config) -> list[Finding]:
    """Each voice loads from intact files; its artifacts and loudness are there."""
    from daemon.runtime.artifacts import default_store
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.registry import VoiceRegistry
    from edge_build.build import missing_artifacts

    store = config.runtime.artifact_dir or default_store()
    # At the config's precision: what the service will load, not what `auto` would.
    backend = OrtCpuBackend(threads=1, artifact_store=store, precision=config.runtime.precision)
    registry = VoiceRegistry(config, backend)
    findings = []
    usable = registry.usable()
    for name in registry.names:
        broken = registry.broken.get(name)
        if broken is not None:
            detail = f"quarantined (the service goes on without it): {broken.error}"
            findings.append(Finding(f"voice {name}", FAIL, detail, broken.fix))
    for name in usable:
        info = registry.get(name).info
        stage = info.stages[0]
        why = [n for n in stage.notes if n.startswith(("auto:", "exact:", f"{stage.precision}:"))]
        precision = f"; precision {why[0] if why else stage.precision}"
        findings.append(
            Finding(f"voice {name}", OK, f"{info.family}, {info.language}, loads{precision}")
        )
    missing = missing_artifacts(config, store, gpu=False)
    if missing:
        fix = (
            "run `fastvoice build` (the service builds them at start unless build_on_start is off)"
        )
        findings.append(
            Finding("artifacts", WARN, f"missing or damaged: {', '.join(missing)}", fix)
        )
    else:
        findings.append(Finding("artifacts", OK, f"intact in {store}"))
    return findings


def _headroom(config: Config | None) -> list[Finding]:
    import psutil

    from daemon.box.files import state_root
    from daemon.runtime.artifacts import cache_root

    places = {
        "cache": cache_root(),
        "state": state_root(),
    }
    if config is not None and config.catalog.dir is not None:
        places["voices"] = config.catalog.dir
    findings = []
    for role, path in places.items():
        existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        free = shutil.disk_usage(existing).free
        status = OK if free >= DISK_HEADROOM_BYTES else WARN
        fix = (
            ""
            if status == OK
            else "free space there: voices, artifacts and the phrase cache need it"
        )
        findings.append(
            Finding(f"disk ({role})", status, f"{free / 1e6:.0f} MB free at {existing}", fix)
        )
    available = psutil.virtual_memory().available
    status = OK if available >= MEMORY_HEADROOM_BYTES else WARN
    fix = "" if status == OK else "stop other services, or use one voice and runtime.workers: 1"
    findings.append(Finding("memory", status, f"{available / 1e6:.0f} MB available", fix))
    return findings


def _gpu(config: Config) -> list[Finding]:
    from daemon.runtime.gpu import probe

    stack = probe(config.gpu.device)
    if config.runtime.backend == "ort-cpu":
        return [Finding("GPU", OK, "not used (runtime.backend: ort-cpu)")]
    if stack.device is None:
        status = FAIL if config.runtime.backend in ("trt", "ort-trt", "ort-cuda") else OK
        detail = f"none: {stack.device_problem}; the CPU backend serves"
        fix = "" if status == OK else "install the NVIDIA driver, or set runtime.backend: auto"
        return [Finding("GPU", status, detail, fix)]
    device = stack.device
    detail = f"{device.name} (compute {device.compute_capability}); "
    detail += (
        f"TensorRT {stack.tensorrt}"
        if stack.tensorrt
        else f"no TensorRT ({stack.tensorrt_problem})"
    )
    providers = ", ".join(stack.ort_providers)
    detail += f"; onnxruntime providers: {providers}"
    if not stack.engines_possible and "CUDAExecutionProvider" not in stack.ort_providers:
        fix = "tools/install-gpu.sh installs onnxruntime-gpu and the CUDA bindings"
        return [Finding("GPU", WARN, detail, fix)]
    return [Finding("GPU", OK, detail)]


def _clock(config: Config) -> list[Finding]:
    from daemon.box.clock import clock_state

    state = clock_state()
    zones = bool(config.mqtt.zones)
    if state is None:
        return [Finding("clock", WARN if zones else OK, "the kernel's clock state is unreadable")]
    if state["synchronised"]:
        return [
            Finding("clock", OK, f"synchronised (estimated error {state['estimated_error_ms']} ms)")
        ]
    fix = "enable NTP (timedatectl set-ntp true): quiet hours and schedules follow the clock"
    if zones:
        fix += ", and zones start announcements at a shared instant"
    return [Finding("clock", WARN, "not synchronised", fix)]
