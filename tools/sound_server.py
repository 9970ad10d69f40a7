"""A real PulseAudio for tests and tools: a null sink `speaker` (paced like a real speaker, its
monitor recordable with `parec -d speaker.monitor`) and an ALSA device `speaker_pa` on it, on a
socket of its own, started and killed at will (killing it is the device going away)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


class SoundServer:
    """A real PulseAudio with a null sink (paced like a real speaker), and an ALSA device
    `speaker_pa` on it: killing the server is the device going away mid-playback."""

    def __init__(self, root: Path, modules: tuple[str, ...] = ()) -> None:
        """`modules`: more PulseAudio modules to load, with their arguments."""
        self.root = root
        self.modules = modules
        self.socket = root / "native"
        (root / "xdg" / "alsa").mkdir(parents=True)
        (root / "xdg" / "alsa" / "asoundrc").write_text(
            f'pcm.speaker_pa {{ type pulse server "unix:{self.socket}" '
            'hint { show on description "speaker_pa" } }\n'
        )
        (root / "client.conf").write_text("autospawn = no\n")
        self.process: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "XDG_CONFIG_HOME": str(self.root / "xdg"),
            "PULSE_CLIENTCONFIG": str(self.root / "client.conf"),
            "PULSE_SERVER": f"unix:{self.socket}",
        }

    def start(self) -> None:
        self.socket.unlink(missing_ok=True)
        env = {**self.env(), "HOME": str(self.root), "PULSE_RUNTIME_PATH": str(self.root / "run")}
        self.process = subprocess.Popen(
            [
                "pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                "-L", "module-null-sink sink_name=speaker",
                "-L", f"module-native-protocol-unix socket={self.socket} auth-anonymous=1",
                *(argument for module in self.modules for argument in ("-L", module)),
            ],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.wait_for(lambda: self.pactl("info").returncode == 0)

    def pactl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["pactl", *args], env=self.env(), capture_output=True, timeout=10)

    def playing(self) -> bool:
        return bool(self.pactl("list", "short", "sink-inputs").stdout.strip())

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @staticmethod
    def wait_for(condition, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the sound server did not get there")
            time.sleep(0.05)
