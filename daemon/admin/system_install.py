"""`sudo fastvoice system install | uninstall`: fastvoice as a service on this box, in one command.

Install (idempotent: a second run changes nothing it made and keeps a config you edited): the
system user `fastvoice` in the audio group (and video on a GPU box) and its directories, declared
the systemd way (a sysusers.d and a tmpfiles.d entry, so an image makes them again at first boot)
and made now by systemd-sysusers; a config from the template for the box (cpu, jetson or rtx:
detected, or `--box`), the unit (ExecStart at this installation's `fastvoice`, refused where the
unit's own sandbox would hide it) with the GPU drop-in where it applies, the on-device artifacts
built as the service's user, then `systemctl enable --now`. `--root DIR` does all of it inside a
directory tree, empty or not (building an image or a package: the user in DIR/etc/passwd,
`systemctl --root` for the enablement, nothing started), which is how the tests check the files,
owners and unit; there the artifacts are built only with a program this machine runs: an
image's own (`--executable`) leaves them to the service's first start, on the box they are
for. Uninstall removes the unit and the user and keeps the config and the voices unless
`--purge`.
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
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the source checkout: daemon/box/ up two
TEMPLATES = {"cpu": "fastvoice.yaml", "jetson": "jetson-orin.yaml", "rtx": "rtx-kiosk.yaml"}
UNIT = "fastvoice.service"
DROP_IN = "fastvoice.service.d/gpu.conf"
Say = Callable[[str], None]
# What the unit's sandbox settings hide from the service: its program must live elsewhere.
HIDDEN_BY = {
    "ProtectHome": ("/home", "/root", "/run/user"),
    "PrivateTmp": ("/tmp", "/var/tmp"),
}


class InstallError(FastvoiceError):
    """A step of the install that failed; the message names the step and the command."""


class UnreachableProgram(InstallError):
    """The unit would run a program its own sandbox hides: a usage error, nothing written."""

    exit_code = 2


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

    @property
    def sysusers(self) -> Path:
        return self.path("/etc/sysusers.d/fastvoice.conf")

    @property
    def tmpfiles(self) -> Path:
        return self.path("/etc/tmpfiles.d/fastvoice.conf")


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


def sysusers_entry(gpu: bool) -> str:
    """The service user, its own group and its memberships, for systemd-sysusers."""
    lines = [
        "# fastvoice's service user (written by `fastvoice system install`)",
        f'u {USER} - "fastvoice text-to-speech" /var/lib/fastvoice /usr/sbin/nologin',
        f"m {USER} audio",
        *([f"m {USER} video"] if gpu else []),
    ]
    return "\n".join(lines) + "\n"


def tmpfiles_entry() -> str:
    """The service's directories, owners and modes, for systemd-tmpfiles at boot."""
    return (
        "# fastvoice's directories (written by `fastvoice system install`)\n"
        f"d /etc/fastvoice 0750 root {USER} -\n"
        f"d /var/lib/fastvoice 0750 {USER} {USER} -\n"
        f"d /var/cache/fastvoice 0750 {USER} {USER} -\n"
    )


def _ensure_user(layout: Layout, gpu: bool, report: Report, say: Say) -> None:
    """The sysusers.d and tmpfiles.d entries, then the user made from them now (in an empty
    tree too: systemd-sysusers writes its user database)."""
    existed = _user_exists(layout)
    for path, text in ((layout.sysusers, sysusers_entry(gpu)), (layout.tmpfiles, tmpfiles_entry())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root = [] if layout.root == Path("/") else ["--root", str(layout.root)]
    _run(["systemd-sysusers", *root, str(layout.sysusers)], f"adding user {USER}")
    groups = ", ".join(["audio", *(["video"] if gpu else [])])
    state = "already there" if existed else "added"
    report.step(say, f"user {USER}: {state}, in group(s) {groups} ({layout.sysusers})")


def sandbox_problem(executable: Path, unit_text: str) -> str | None:
    """Why the unit's sandbox (ProtectHome=, PrivateTmp=) would hide its program (the console
    script or the interpreter it starts), or None."""
    hidden: list[str] = []
    for line in unit_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in HIDDEN_BY and value.strip() not in ("no", "false", "read-only", ""):
            hidden += [f"{prefix} ({key.strip()}={value.strip()})" for prefix in HIDDEN_BY[key]]
    programs = [executable, executable.resolve()]
    try:
        first = executable.read_bytes()[:256].split(b"\n", 1)[0]
    except OSError:
        first = b""
    if first.startswith(b"#!"):
        interpreter = Path(first[2:].decode(errors="replace").split()[0])
        programs += [interpreter, interpreter.resolve()]
    for program in programs:
        for entry in hidden:
            prefix = entry.split(" ", 1)[0]
            if program.as_posix() == prefix or program.as_posix().startswith(prefix + "/"):
                return f"{program} is under {entry}, which the unit's sandbox hides from it"
    return None


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


def unit_text(executable: Path) -> str:
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


def install(
    root: Path,
    box: str | None,
    build: bool,
    start: bool,
    say: Say = print,
    executable: Path | None = None,
) -> Report:
    """`executable`: the `fastvoice` the unit runs (default: this installation's)."""
    layout, report = Layout(root), Report()
    real = root == Path("/")
    if real and os.geteuid() != 0:
        raise InstallError("run it as root: sudo fastvoice system install")
    executable = executable or fastvoice_executable()
    unit = unit_text(executable)
    problem = sandbox_problem(executable, unit)
    if problem is not None:
        raise UnreachableProgram(
            f"the unit would not start: {problem}; install fastvoice where the service may run "
            "it (python3 -m venv /opt/fastvoice/.venv, then that venv's fastvoice system "
            "install), or name it with --executable"
        )
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
    layout.unit.write_text(unit)
    layout.unit.chmod(0o644)
    report.step(say, f"unit: {layout.unit}")
    if gpu:
        layout.drop_in.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shipped("systemd/fastvoice-gpu.conf"), layout.drop_in)
        report.step(say, f"GPU drop-in: {layout.drop_in}")
    if build:
        _build(layout, executable, uid, gid, report, say)
    systemctl = ["systemctl"] if real else ["systemctl", "--root", str(root)]
    if real:
        _run([*systemctl, "daemon-reload"], "reloading systemd")
    enable = [*systemctl, "enable", *(["--now"] if start and real else []), UNIT]
    _run(enable, "enabling the unit")
    report.step(say, "enabled" + (" and started" if start and real else "") + f": {UNIT}")
    say("check it: fastvoice doctor --config /etc/fastvoice/fastvoice.yaml; "
        "journalctl -u fastvoice -f; systemctl status fastvoice")  # fmt: skip
    return report


def _runs_here(program: Path) -> bool:
    """Whether `program` can be started on this machine (under --root it may exist only in the
    image being prepared)."""
    return program.is_file() and os.access(program, os.X_OK)


def _build(layout: Layout, executable: Path, uid: int, gid: int, report: Report, say: Say) -> None:
    """The artifacts and loudness, made into the service's directories (the build's progress
    shows as it goes): as the service user on a box; under --root, whose user exists only in
    the tree, by this user and then handed to it, unless the program is the image's own."""
    in_tree = layout.root != Path("/")
    if in_tree and not _runs_here(executable):
        report.step(
            say,
            f"artifacts: not built here: {executable} is not on this machine (a program of the "
            "image); the service builds them at its first start (runtime.build_on_start), for "
            f"the box it runs on, or run `{executable} build` there",
        )
        return
    env = {
        **os.environ,
        "CACHE_DIRECTORY": str(layout.cache),
        "STATE_DIRECTORY": str(layout.state),
    }
    command = [str(executable), "build", "--config", str(layout.config)]
    say("building the voices' artifacts for this box (a minute or more on a GPU box)")

    def as_service_user() -> None:
        os.setgid(gid)
        os.setuid(uid)

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
    for entry in (layout.sysusers, layout.tmpfiles):
        entry.unlink(missing_ok=True)
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
