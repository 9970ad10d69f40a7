"""`fastvoice system install --root DIR`: the whole install inside a directory tree with its own
user database, checked as files, owners, modes and a unit that systemd accepts; a second run
changes nothing; uninstall keeps the config and the voices unless --purge."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture
def tree() -> Iterator[Path]:
    """A root with a copy of this machine's user database (useradd --prefix edits it), where
    the service user may reach its directories, as under / (pytest's own temporary folder is
    private to root)."""
    root = Path(tempfile.mkdtemp(prefix="fastvoice-root-", dir="/var/tmp"))
    root.chmod(0o755)
    (root / "etc").mkdir(parents=True)
    for name in ("passwd", "group", "shadow", "gshadow"):
        shutil.copy2(f"/etc/{name}", root / "etc" / name)
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


def system(*args: str) -> subprocess.CompletedProcess:
    result = run_cli("system", *args, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def test_install_lays_out_user_dirs_config_and_a_verified_unit(tree):
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


def test_a_second_install_changes_nothing_and_keeps_an_edited_config(tree):
    system("install", "--root", str(tree), "--box", "cpu", "--no-build")
    config = tree / "etc/fastvoice/fastvoice.yaml"
    config.write_text("version: 1\naudio: {volume: 0.5}\n")
    users = (tree / "etc/passwd").read_text()
    again = system("install", "--root", str(tree), "--box", "cpu", "--no-build").stdout.decode()
    assert "user fastvoice: already there" in again and "kept as it is" in again
    assert config.read_text() == "version: 1\naudio: {volume: 0.5}\n"
    assert (tree / "etc/passwd").read_text() == users


def test_a_gpu_box_gets_its_template_the_drop_in_and_the_video_group(tree):
    system("install", "--root", str(tree), "--box", "jetson", "--no-build")
    drop_in = tree / "etc/systemd/system/fastvoice.service.d/gpu.conf"
    assert "ProcSubset=all" in drop_in.read_text()
    template = Path(__file__).resolve().parent.parent / "config" / "jetson-orin.yaml"
    assert (tree / "etc/fastvoice/fastvoice.yaml").read_text() == template.read_text()
    video = next(line for line in (tree / "etc/group").read_text().splitlines()
                 if line.startswith("video:"))  # fmt: skip
    assert "fastvoice" in video.split(":")[3].split(",")


def test_the_build_runs_as_the_service_user_into_its_cache(tree):
    said = system("install", "--root", str(tree), "--box", "cpu").stdout.decode()
    uid, _ = service_ids(tree)
    artifacts = tree / "var/cache/fastvoice/artifacts"
    manifests = list(artifacts.glob("*/manifest.json"))
    assert manifests and all(path.stat().st_uid == uid for path in manifests)
    assert list((artifacts / "loudness").glob("*.json"))
    assert "artifacts: built into" in said


def test_uninstall_keeps_config_and_voices_unless_purged(tree):
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


def test_an_installed_package_finds_its_templates_under_its_prefix(tmp_path, monkeypatch):
    """A wheel installs config/ and systemd/ under <prefix>/share/fastvoice (pyproject's
    data-files); a source checkout has them at its top."""
    from daemon import system_install

    share = tmp_path / "share" / "fastvoice" / "systemd"
    share.mkdir(parents=True)
    (share / "fastvoice.service").write_text("[Service]\n")
    monkeypatch.setattr(system_install, "PACKAGE_ROOT", tmp_path / "site-packages")
    monkeypatch.setattr(system_install.sys, "prefix", str(tmp_path))
    assert system_install.shipped("systemd/fastvoice.service") == share / "fastvoice.service"
    with pytest.raises(system_install.InstallError, match=r"config/cpu\.yaml is not installed"):
        system_install.shipped("config/cpu.yaml")
