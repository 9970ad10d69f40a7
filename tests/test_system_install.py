"""`fastvoice system install --root DIR`: the whole install inside a directory tree with its own
user database, checked as files, owners, modes and a unit that systemd accepts; a second run
changes nothing; uninstall keeps the config and the voices unless --purge."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # builds voices as the service user and a wheel


@pytest.fixture(scope="module")
def program() -> Iterator[Path]:
    """The fastvoice the units run, where their sandbox lets them (this checkout's venv may be
    under /tmp or /home, which the unit hides): a script in /var/lib that starts it."""
    folder = Path(tempfile.mkdtemp(prefix="fastvoice-program-", dir="/var/lib"))
    folder.chmod(0o755)
    script = folder / "fastvoice"
    script.write_text(f'#!/bin/sh\nexec {Path(sys.executable).parent / "fastvoice"} "$@"\n')
    script.chmod(0o755)
    yield script
    shutil.rmtree(folder)


def _tree(copy_users: bool) -> Path:
    """A root where the service user may reach its directories, as under / (pytest's own
    temporary folder is private to root); with a copy of this machine's user database, or
    empty (an image being built)."""
    root = Path(tempfile.mkdtemp(prefix="fastvoice-root-", dir="/var/tmp"))
    root.chmod(0o755)
    if copy_users:
        (root / "etc").mkdir(parents=True)
        for name in ("passwd", "group", "shadow", "gshadow"):
            shutil.copy2(f"/etc/{name}", root / "etc" / name)
    return root


@pytest.fixture
def tree() -> Iterator[Path]:
    root = _tree(copy_users=True)
    yield root
    shutil.rmtree(root)


@pytest.fixture
def empty_tree() -> Iterator[Path]:
    root = _tree(copy_users=False)
    yield root
    shutil.rmtree(root)


def service_ids(root: Path) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == "fastvoice":
            return int(fields[2]), int(fields[3])
    raise AssertionError("no fastvoice user")


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


@pytest.fixture
def system(program: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Runs `fastvoice system ...`, which must succeed; an install's unit runs `program`."""

    def run(*args: str) -> subprocess.CompletedProcess:
        extra = ["--executable", str(program)] if args[0] == "install" else []
        result = run_cli("system", *args, *extra, timeout=600)
        assert result.returncode == 0, result.stderr
        return result

    return run


def test_install_lays_out_user_dirs_config_and_a_verified_unit(tree, system):
    said = system("install", "--root", str(tree), "--box", "cpu", "--no-build").stdout.decode()
    uid, gid = service_ids(tree)
    audio = next(line for line in (tree / "etc/group").read_text().splitlines()
                 if line.startswith("audio:"))  # fmt: skip
    assert "fastvoice" in audio.split(":")[3].split(",")
    assert owner_mode(tree / "etc/fastvoice") == (0, gid, 0o750)
    assert owner_mode(tree / "etc/fastvoice/fastvoice.yaml") == (0, gid, 0o640)
    assert owner_mode(tree / "var/lib/fastvoice") == (uid, gid, 0o750)
    assert owner_mode(tree / "var/cache/fastvoice") == (uid, gid, 0o750)
    shipped = Path(__file__).resolve().parent.parent / "config" / "fastvoice.yaml"
    assert (tree / "etc/fastvoice/fastvoice.yaml").read_text() == shipped.read_text()
    unit = tree / "etc/systemd/system/fastvoice.service"
    executable = next(
        line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")
    )
    assert Path(executable.split("=", 1)[1].split()[0]).is_file()
    wanted = tree / "etc/systemd/system/multi-user.target.wants/fastvoice.service"
    assert wanted.is_symlink()
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True
    )
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit)], capture_output=True, text=True
    )
    score = re.search(r"Overall exposure level for fastvoice.service: ([0-9.]+)", security.stdout)
    assert score is not None and float(score.group(1)) <= 2.0, security.stdout[-300:]
    assert "check it: fastvoice doctor" in said
    assert not (tree / "etc/systemd/system/fastvoice.service.d").exists()  # no GPU drop-in


def test_a_second_install_changes_nothing_and_keeps_an_edited_config(tree, system):
    system("install", "--root", str(tree), "--box", "cpu", "--no-build")
    config = tree / "etc/fastvoice/fastvoice.yaml"
    config.write_text("version: 1\naudio: {volume: 0.5}\n")
    users = (tree / "etc/passwd").read_text()
    again = system("install", "--root", str(tree), "--box", "cpu", "--no-build").stdout.decode()
    assert "user fastvoice: already there" in again and "kept as it is" in again
    assert config.read_text() == "version: 1\naudio: {volume: 0.5}\n"
    assert (tree / "etc/passwd").read_text() == users


def test_a_gpu_box_gets_its_template_the_drop_in_and_the_video_group(tree, system):
    system("install", "--root", str(tree), "--box", "jetson", "--no-build")
    drop_in = tree / "etc/systemd/system/fastvoice.service.d/gpu.conf"
    assert "ProcSubset=all" in drop_in.read_text()
    template = Path(__file__).resolve().parent.parent / "config" / "jetson-orin.yaml"
    assert (tree / "etc/fastvoice/fastvoice.yaml").read_text() == template.read_text()
    video = next(line for line in (tree / "etc/group").read_text().splitlines()
                 if line.startswith("video:"))  # fmt: skip
    assert "fastvoice" in video.split(":")[3].split(",")


def test_the_build_runs_as_the_service_user_into_its_cache(tree, system):
    said = system("install", "--root", str(tree), "--box", "cpu").stdout.decode()
    uid, _ = service_ids(tree)
    artifacts = tree / "var/cache/fastvoice/artifacts"
    manifests = list(artifacts.glob("*/manifest.json"))
    assert manifests and all(path.stat().st_uid == uid for path in manifests)
    assert list((artifacts / "loudness").glob("*.json"))
    assert "artifacts: built into" in said


def test_uninstall_keeps_config_and_voices_unless_purged(tree, system):
    system("install", "--root", str(tree), "--box", "cpu", "--no-build")
    voices = tree / "var/lib/fastvoice/voices"
    voices.mkdir()
    system("uninstall", "--root", str(tree))
    assert not (tree / "etc/systemd/system/fastvoice.service").exists()
    assert not (tree / "etc/systemd/system/multi-user.target.wants/fastvoice.service").exists()
    assert "fastvoice:" not in (tree / "etc/passwd").read_text()
    assert (tree / "etc/fastvoice/fastvoice.yaml").exists() and voices.is_dir()
    system("install", "--root", str(tree), "--box", "cpu", "--no-build")
    system("uninstall", "--root", str(tree), "--purge")
    assert not (tree / "etc/fastvoice").exists() and not (tree / "var/lib/fastvoice").exists()


def test_an_empty_tree_gets_the_user_and_the_systemd_entries_quickly(empty_tree, system):
    """Building an image or a package: no user database in the tree yet."""
    started = time.monotonic()
    said = system("install", "--root", str(empty_tree), "--box", "jetson", "--no-build")
    assert time.monotonic() - started < 10, "no waiting on a lock"  # groupadd waited 14 s
    assert "user fastvoice: added" in said.stdout.decode()
    uid, gid = service_ids(empty_tree)
    groups = {
        line.split(":")[0]: line.split(":")[3].split(",")
        for line in (empty_tree / "etc/group").read_text().splitlines()
    }
    assert "fastvoice" in groups["audio"] and "fastvoice" in groups["video"]
    assert owner_mode(empty_tree / "var/lib/fastvoice") == (uid, gid, 0o750)
    sysusers = (empty_tree / "etc/sysusers.d/fastvoice.conf").read_text()
    assert "u fastvoice -" in sysusers and "m fastvoice video" in sysusers
    tmpfiles = (empty_tree / "etc/tmpfiles.d/fastvoice.conf").read_text()
    assert "d /var/lib/fastvoice 0750 fastvoice fastvoice -" in tmpfiles
    # What systemd would do at first boot with the entries alone: the same user, the same dirs.
    shutil.rmtree(empty_tree / "var")
    for name in ("passwd", "group", "shadow", "gshadow"):
        (empty_tree / "etc" / name).unlink()
    for tool in (["systemd-sysusers"], ["systemd-tmpfiles", "--create"]):
        entry = "sysusers.d" if tool[0] == "systemd-sysusers" else "tmpfiles.d"
        command = [
            *tool,
            "--root",
            str(empty_tree),
            str(empty_tree / "etc" / entry / "fastvoice.conf"),
        ]
        assert subprocess.run(command, capture_output=True).returncode == 0
    assert service_ids(empty_tree) == (uid, gid)
    assert owner_mode(empty_tree / "var/cache/fastvoice") == (uid, gid, 0o750)
    system("uninstall", "--root", str(empty_tree))
    assert not (empty_tree / "etc/sysusers.d/fastvoice.conf").exists()


def test_an_image_whose_program_is_only_in_it_leaves_the_build_to_its_first_start(empty_tree):
    """`--root` with `--executable` a program of the image, not of this machine: the unit runs
    it, and the artifacts, which are keyed to the box that runs them, are built by the service
    at its first start (runtime.build_on_start) rather than here."""
    program = Path("/opt/fastvoice-image-only/.venv/bin/fastvoice")
    assert not program.exists()
    install = ["install", "--root", str(empty_tree), "--box", "cpu", "--executable", str(program)]
    result = run_cli("system", *install)
    assert result.returncode == 0, result.stderr
    said = result.stdout.decode()
    assert f"artifacts: not built here: {program} is not on this machine" in said
    assert "the service builds them at its first start" in said
    unit = (empty_tree / "etc/systemd/system/fastvoice.service").read_text()
    assert f"ExecStart={program} serve" in unit
    assert list((empty_tree / "var/cache/fastvoice").iterdir()) == []


@pytest.mark.parametrize("folder", ["/root", "/home/someone", "/tmp", "/var/tmp"])
def test_a_program_the_units_sandbox_hides_is_refused_with_the_fix(tree, folder):
    program = Path(folder) / "venv/bin/fastvoice"
    install = ["install", "--root", str(tree), "--no-build", "--executable", str(program)]
    result = run_cli("system", *install)
    assert result.returncode == 2
    assert f"{program} is under {folder.split('/someone')[0]}".encode() in result.stderr
    assert b"which the unit's sandbox hides from it" in result.stderr
    assert b"/opt/fastvoice/.venv" in result.stderr
    assert not (tree / "etc/systemd/system/fastvoice.service").exists()


def test_an_installed_package_finds_its_templates_under_its_prefix(tmp_path, monkeypatch):
    """A wheel installs config/ and systemd/ under <prefix>/share/fastvoice (pyproject's
    data-files); a source checkout has them at its top."""
    from daemon.admin import system_install

    share = tmp_path / "share" / "fastvoice" / "systemd"
    share.mkdir(parents=True)
    (share / "fastvoice.service").write_text("[Service]\n")
    monkeypatch.setattr(system_install, "PACKAGE_ROOT", tmp_path / "site-packages")
    monkeypatch.setattr(system_install.sys, "prefix", str(tmp_path))
    assert system_install.shipped("systemd/fastvoice.service") == share / "fastvoice.service"
    with pytest.raises(system_install.InstallError, match=r"config/cpu\.yaml is not installed"):
        system_install.shipped("config/cpu.yaml")


def test_the_wheel_ships_the_benchmark_and_its_copy_runs_away_from_the_checkout(tmp_path):
    """`fastvoice bench` on an installed box runs <prefix>/share/fastvoice/tools/bench.py: the
    wheel carries it and the scripts it imports, and that copy runs with no checkout near."""
    import zipfile

    from tests.conftest import REPO

    built = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", str(REPO)),
            *("--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "wheel")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("fastvoice-*.whl")
    prefix = tmp_path / "prefix"
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            data = name.split(".data/data/", 1)
            if len(data) == 2 and data[1].startswith("share/fastvoice/tools/"):
                (prefix / data[1]).parent.mkdir(parents=True, exist_ok=True)
                (prefix / data[1]).write_bytes(archive.read(name))
    tools = prefix / "share" / "fastvoice" / "tools"
    assert {p.name for p in tools.glob("*.py")} >= {"bench.py", "bench_worker.py"}
    ran = subprocess.run(
        [sys.executable, str(tools / "bench.py"), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "--only" in ran.stdout
