"""`sudo fastvoice system install | uninstall`: fastvoice as a service on this box, in one command.

Install (idempotent: a second run changes nothing it made and keeps a config you edited): the
system user `fastvoice` in the audio group (and video on a GPU box), its directories, a config
from the template for the box (cpu, jetson or rtx: detected, or `--box`), the unit (ExecStart at
this installation's `fastvoice`) with the GPU drop-in where it applies, the on-device artifacts
built as the service's user, then `systemctl enable --now`. `--root DIR` does all of it inside a
directory tree (the user in DIR/etc/passwd, `systemctl --root` for the enablement, nothing
started), which is how the tests check the files, owners and unit. Uninstall removes the unit and
the user and keeps the config and the voices unless `--purge`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from daemon.errors import FastvoiceError

USER = "fastvoice"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = {"cpu": "fastvoice.yaml", "jetson": "jetson-orin.yaml", "rtx": "rtx-kiosk.yaml"}
UNIT = "fastvoice.service"
DROP_IN = "fastvoice.service.d/gpu.conf"
Say = Callable[[str], None]


class InstallError(FastvoiceError):
    """A step of the install that failed; the message names the step and the command."""


def detect_box(root: Path = Path("/")) -> str:
    """jetson (L4T's release file), rtx (an NVIDIA driver), else cpu."""
    if (root / "etc/nv_tegra_release").exists():
        return "jetson"
    if (root / "proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi"):
        return "rtx"
    return "cpu"


@dataclass
class Layout:
    """Where each file goes, under `root` (/ on a real box)."""

    root: Path

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    @property
    def config_dir(self) -> Path:
        return self.path("/etc/fastvoice")

    @property
    def config(self) -> Path:
        return self.config_dir / "fastvoice.yaml"

    @property
    def state(self) -> Path:
        return self.path("/var/lib/fastvoice")

    @property
    def cache(self) -> Path:
        return self.path("/var/cache/fastvoice")

    @property
    def unit(self) -> Path:
        return self.path(f"/etc/systemd/system/{UNIT}")

    @property
    def drop_in(self) -> Path:
        return self.path(f"/etc/systemd/system/{DROP_IN}")


@dataclass
class Report:
    done: list[str] = field(default_factory=list)

    def step(self, say: Say, text: str) -> None:
        self.done.append(text)
        say(text)


def _run(command: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise InstallError(f"{what}: {command[0]} is not installed") from None
    if result.returncode != 0:
        problem = (result.stderr or result.stdout).strip().splitlines()
        raise InstallError(
            f"{what}: `{' '.join(command)}` failed: {problem[-1] if problem else ''}"
        )
    return result


def _ids(layout: Layout) -> tuple[int, int]:
    """The service user's uid and gid (from the tree's own passwd file under --root)."""
    passwd = layout.path("/etc/passwd")
    if layout.root != Path("/"):
        for line in passwd.read_text().splitlines():
            fields = line.split(":")
            if fields[0] == USER:
                return int(fields[2]), int(fields[3])
        raise InstallError(f"user {USER} is not in {passwd}")
    entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


def _user_exists(layout: Layout) -> bool:
    try:
        _ids(layout)
    except (InstallError, KeyError, FileNotFoundError):
        return False
    return True


def _group_exists(layout: Layout, group: str) -> bool:
    groups = layout.path("/etc/group")
    listed = groups.read_text() if groups.exists() else ""
    return any(line.startswith(f"{group}:") for line in listed.splitlines())


def _ensure_user(layout: Layout, gpu: bool, report: Report, say: Say) -> None:
    groups = ["audio", *(["video"] if gpu else [])]
    prefix = [] if layout.root == Path("/") else ["--prefix", str(layout.root)]
    if _user_exists(layout):
        report.step(say, f"user {USER}: already there")
        return
    for group in groups:  # a minimal tree may lack them
        if not _group_exists(layout, group):
            _run(["groupadd", *prefix, "--system", group], f"adding group {group}")
    own_group = ["--gid", USER] if _group_exists(layout, USER) else ["--user-group"]
    command = ["useradd", *prefix, "--system", "--home-dir", "/var/lib/fastvoice"]
    command += ["--no-create-home", "--shell", "/usr/sbin/nologin", *own_group]
    command += ["--groups", ",".join(groups), USER]
    _run(command, f"adding user {USER}")
    report.step(say, f"user {USER}: added, in group(s) {', '.join(groups)}")


def _directory(path: Path, mode: int, owner: tuple[int, int]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, *owner)
    path.chmod(mode)


def shipped(relative: str) -> Path:
    """A file fastvoice ships (a config template, the unit): in the source checkout, else where
    the package installed it (<prefix>/share/fastvoice)."""
    for base in (PACKAGE_ROOT, Path(sys.prefix) / "share" / "fastvoice"):
        if (base / relative).is_file():
            return base / relative
    raise InstallError(f"{relative} is not installed with fastvoice (reinstall the package)")


def _unit_text(executable: Path) -> str:
    """The shipped unit with ExecStart at this installation's console script."""
    text = shipped(f"systemd/{UNIT}").read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            line = f"ExecStart={executable} serve --config /etc/fastvoice/fastvoice.yaml"
        if line.startswith("Documentation="):
            line = "Documentation=file:///etc/fastvoice/fastvoice.yaml"
        lines.append(line)
    return "\n".join(lines) + "\n"


def fastvoice_executable() -> Path:
    return Path(sys.executable).parent / "fastvoice"


def install(root: Path, box: str | None, build: bool, start: bool, say: Say = print) -> Report:
    layout, report = Layout(root), Report()
    real = root == Path("/")
    if real and os.geteuid() != 0:
        raise InstallError("run it as root: sudo fastvoice system install")
    chosen = box or detect_box(root)
    gpu = chosen != "cpu"
    report.step(say, f"box: {chosen}" + ("" if box else " (detected; --box overrides)"))
    _ensure_user(layout, gpu, report, say)
    uid, gid = _ids(layout)
    _directory(layout.config_dir, 0o750, (0, gid))
    _directory(layout.state, 0o750, (uid, gid))
    _directory(layout.cache, 0o750, (uid, gid))
    report.step(say, f"directories: {layout.config_dir}, {layout.state}, {layout.cache}")
    if layout.config.exists():
        report.step(say, f"config: {layout.config} kept as it is")
    else:
        shutil.copyfile(shipped(f"config/{TEMPLATES[chosen]}"), layout.config)
        os.chown(layout.config, 0, gid)
        layout.config.chmod(0o640)
        report.step(say, f"config: {layout.config} from config/{TEMPLATES[chosen]}")
    layout.unit.parent.mkdir(parents=True, exist_ok=True)
    layout.unit.write_text(_unit_text(fastvoice_executable()))
    layout.unit.chmod(0o644)
    report.step(say, f"unit: {layout.unit}")
    if gpu:
        layout.drop_in.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shipped("systemd/fastvoice-gpu.conf"), layout.drop_in)
        report.step(say, f"GPU drop-in: {layout.drop_in}")
    if build:
        _build(layout, uid, gid, report, say)
    systemctl = ["systemctl"] if real else ["systemctl", "--root", str(root)]
    if real:
        _run([*systemctl, "daemon-reload"], "reloading systemd")
    enable = [*systemctl, "enable", *(["--now"] if start and real else []), UNIT]
    _run(enable, "enabling the unit")
    report.step(say, "enabled" + (" and started" if start and real else "") + f": {UNIT}")
    say("check it: fastvoice doctor --config /etc/fastvoice/fastvoice.yaml; "
        "journalctl -u fastvoice -f; systemctl status fastvoice")  # fmt: skip
    return report


def _build(layout: Layout, uid: int, gid: int, report: Report, say: Say) -> None:
    """The artifacts and loudness, made into the service's directories (the build's progress
    shows as it goes): as the service user on a box; under --root, whose user exists only in
    the tree, by this user and then handed to it."""
    env = {
        **os.environ,
        "CACHE_DIRECTORY": str(layout.cache),
        "STATE_DIRECTORY": str(layout.state),
    }
    command = [str(fastvoice_executable()), "build", "--config", str(layout.config)]
    say("building the voices' artifacts for this box (a minute or more on a GPU box)")

    def as_service_user() -> None:
        os.setgid(gid)
        os.setuid(uid)

    in_tree = layout.root != Path("/")
    try:
        result = subprocess.run(
            command, env=env, preexec_fn=None if in_tree else as_service_user, text=True
        )
    except PermissionError as error:
        raise InstallError(
            f"building the artifacts: user {USER} cannot run {command[0]} ({error.strerror}): "
            "install fastvoice where every user may read it (e.g. /opt/fastvoice/.venv)"
        ) from None
    if result.returncode != 0:
        raise InstallError(f"building the artifacts: `{' '.join(command)}` failed")
    if in_tree:
        for path in (layout.cache, *layout.cache.rglob("*")):
            os.chown(path, uid, gid, follow_symlinks=False)
    report.step(say, f"artifacts: built into {layout.cache}")


def uninstall(root: Path, purge: bool, say: Say = print) -> Report:
    layout, report = Layout(root), Report()
    real = root == Path("/")
    if real and os.geteuid() != 0:
        raise InstallError("run it as root: sudo fastvoice system uninstall")
    systemctl = ["systemctl"] if real else ["systemctl", "--root", str(root)]
    if layout.unit.exists():
        _run([*systemctl, "disable", *(["--now"] if real else []), UNIT], "disabling the unit")
        layout.unit.unlink()
        report.step(say, f"unit: {layout.unit} removed")
    if layout.drop_in.exists():
        layout.drop_in.unlink()
        layout.drop_in.parent.rmdir()
        report.step(say, f"GPU drop-in: {layout.drop_in} removed")
    if real:
        _run(["systemctl", "daemon-reload"], "reloading systemd")
    if _user_exists(layout):
        prefix = [] if real else ["--prefix", str(root)]
        _run(["userdel", *prefix, USER], f"removing user {USER}")
        if _group_exists(layout, USER):
            _run(["groupdel", *prefix, USER], f"removing group {USER}")
        report.step(say, f"user {USER}: removed")
    shutil.rmtree(layout.cache, ignore_errors=True)
    report.step(say, f"artifacts: {layout.cache} removed")
    if purge:
        shutil.rmtree(layout.config_dir, ignore_errors=True)
        shutil.rmtree(layout.state, ignore_errors=True)
        report.step(say, f"config and voices: {layout.config_dir}, {layout.state} removed")
    else:
        report.step(
            say, f"kept: {layout.config_dir} and {layout.state} (voices); --purge removes them"
        )
    return report
