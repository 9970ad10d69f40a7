"""`fastvoice voices`: Piper's catalogue served by a real HTTP server, real voice files, each
download checked; what a cut, a damaged file, a full disk or a wrong name does."""

from __future__ import annotations

import json
import os
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from daemon.voices.bundled import available
from daemon.voices.catalog import CatalogFile
from daemon.voices.download import DownloadError, fetch
from tests.conftest import run_cli
from tests.voice_catalog import CatalogServer

pytestmark = pytest.mark.slow  # installs voices from a served catalogue

GERMAN = "de_DE-thorsten-medium"
GERMAN_MODEL = f"de/de_DE/thorsten/medium/{GERMAN}.onnx"
TRIO = "en_GB-trio-medium"


def box_config(directory: Path, server: CatalogServer, voices_dir: Path | None = None) -> Path:
    """A box's config against the test mirror (fp32 only: the build on install stays short)."""
    config = directory / "fastvoice.yaml"
    data = {
        "catalog": {
            "url": server.url + "voices.json",
            "files_url": server.url,
            "dir": str(voices_dir or directory / "voices"),
        },
        "runtime": {"precision": "fp32", "artifact_dir": str(directory / "artifacts")},
    }
    config.write_text(json.dumps(data))
    return config


def voices(config: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("voices", *args, "--config", str(config), timeout=300)


def installed(config: Path) -> list[str]:
    result = voices(config, "list", "--installed", "--json")
    assert result.returncode == 0, result.stderr
    return [row["name"] for row in json.loads(result.stdout) if row["source"] == "catalogue"]


def test_list_reads_the_catalogue_and_filters_by_language(tmp_path, catalog_server):
    config = box_config(tmp_path, catalog_server)
    every = json.loads(voices(config, "list", "--json").stdout)
    bundled = set(available())  # the Kokoro voices of the kokoro extra
    assert {row["name"] for row in every} == {GERMAN, "fr_FR-siwis-medium", TRIO} | bundled
    assert not any(row["installed"] for row in every)  # the mirror has no en_US-joe-medium
    german = voices(config, "list", "--language", "de")
    assert german.returncode == 0 and GERMAN in german.stdout.decode()
    assert "fr_FR" not in german.stdout.decode()
    assert installed(config) == []


def test_install_checks_builds_and_speaks_german(tmp_path, catalog_server, mirror):
    config = box_config(tmp_path, catalog_server)
    catalog_server.faults.requests.clear()
    result = voices(config, "install", GERMAN)
    assert result.returncode == 0, result.stderr
    assert f"installed {GERMAN}" in result.stdout.decode()
    assert "loudness: measured" in result.stdout.decode()
    assert installed(config) == [GERMAN]
    folder = tmp_path / "voices" / "de/de_DE/thorsten/medium"
    assert (folder / f"{GERMAN}.onnx").read_bytes() == (mirror / GERMAN_MODEL).read_bytes()
    assert not list((tmp_path / "voices").rglob("*.part"))
    index = json.loads((tmp_path / "voices" / "voices.json").read_text())
    assert list(index) == [GERMAN]  # the box's folder is a catalogue mirror itself
    assert (
        index[GERMAN]["files"] == json.loads((mirror / "voices.json").read_text())[GERMAN]["files"]
    )

    said = run_cli("text", "--config", str(config), "--voice", GERMAN, "am 3. Oktober um 14:30 Uhr")
    assert said.returncode == 0, said.stderr
    assert "am dritten Oktober um vierzehn Uhr dreißig" in said.stdout.decode()
    said = run_cli(
        "text",
        *("--config", str(config), "--voice", GERMAN),
        "Der 2. Versuch am 7.12. kostet 5 Euro, bei 20 °C und 30 % Rabatt.",
    )
    assert said.returncode == 0, said.stderr
    assert said.stdout.decode().strip() == (
        "Der zweite Versuch am siebten Dezember kostet fünf Euro, "
        "bei zwanzig Grad Celsius und dreißig Prozent Rabatt."
    )

    out = tmp_path / "german.wav"
    spoken = run_cli(
        "say",
        "--config",
        str(config),
        "--voice",
        GERMAN,
        "Gleis 3, Abfahrt 14:30 Uhr.",
        "-o",
        str(out),
    )
    assert spoken.returncode == 0, spoken.stderr
    with wave.open(str(out)) as wav:
        assert wav.getnframes() / wav.getframerate() > 1.0

    shown = json.loads(voices(config, "show", GERMAN, "--json").stdout)
    assert shown["installed"] and shown["catalogue"]["language"] == "de_DE"
    assert shown["loudness"]["lufs"]["single"] < -10


def test_install_under_auto_precision_needs_no_pesq(tmp_path, catalog_server):
    """A box installs from wheels, and pesq has none: `voices install` under `precision: auto`
    (the gate's windows judged) goes through without it, and the build's record says what the
    gate judged by; once pesq is there, the next build judges again with it. pesq is hidden by a
    module of that name that fails to import, as on a box where it is not installed."""
    hidden = tmp_path / "no-pesq"
    hidden.mkdir()
    (hidden / "pesq.py").write_text("raise ImportError('No module named pesq')\n")
    config = box_config(tmp_path, catalog_server)
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "runtime": {**data["runtime"], "precision": "auto"}}))
    env = {**os.environ, "PYTHONPATH": str(hidden)}
    result = run_cli("voices", "install", GERMAN, "--config", str(config), env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "PESQ not measured" in result.stdout.decode()

    def precision_choices() -> list[dict]:
        manifests = [
            json.loads(m.read_text()) for m in (tmp_path / "artifacts").glob("*/manifest.json")
        ]
        return [m for m in manifests if m.get("kind") == "ort-precision-choice"]

    choices = precision_choices()
    assert len(choices) == 1, choices
    judged = choices[0]["approximated"]
    assert judged["pesq_mean"] is None and "PESQ" not in judged["judged_by"]
    assert "worst block" in judged["judged_by"]
    # pesq installed since (the `gate` extra): the next build judges again, with it (and builds
    # the embedded voice, judged with it from the start).
    rebuilt = run_cli("build", "--config", str(config), timeout=900)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "PESQ not measured" not in rebuilt.stdout.decode()
    judged_again = [choice["approximated"]["judged_by"] for choice in precision_choices()]
    assert len(judged_again) == 2 and all("PESQ" in by for by in judged_again), judged_again


def test_unknown_name_is_refused_before_any_download(tmp_path, catalog_server):
    config = box_config(tmp_path, catalog_server)
    catalog_server.faults.requests.clear()
    result = voices(config, "install", "de_DE-thorsten-mediun")
    assert result.returncode == 2
    assert b"not in the catalogue; did you mean de_DE-thorsten-medium" in result.stderr
    assert [path for path, _ in catalog_server.faults.requests] == ["voices.json"]
    assert installed(config) == []


def test_a_damaged_download_never_becomes_a_voice(tmp_path, catalog_server):
    config = box_config(tmp_path, catalog_server)
    catalog_server.faults.damage.add(GERMAN_MODEL)
    result = voices(config, "install", GERMAN, "--no-build")
    assert result.returncode == 1
    assert b"md5" in result.stderr and b"differs from the catalogue's" in result.stderr
    assert b"the file was removed" in result.stderr
    assert installed(config) == []
    assert not list((tmp_path / "voices").rglob("*.onnx*"))
    assert voices(config, "install", GERMAN, "--no-build").returncode == 0  # fetched whole again
    assert installed(config) == [GERMAN]


def test_a_cut_download_resumes_where_it_stopped(tmp_path, catalog_server, mirror):
    config = box_config(tmp_path, catalog_server)
    size = (mirror / GERMAN_MODEL).stat().st_size
    catalog_server.faults.cut_after[GERMAN_MODEL] = [1_000_000, 1_000_000, 1_000_000]
    catalog_server.faults.requests.clear()
    result = voices(config, "install", GERMAN, "--no-build")
    assert result.returncode == 1
    assert f"cut off after 3000000 of {size} bytes".encode() in result.stderr
    assert b"run the install again to resume" in result.stderr
    assert installed(config) == []
    ranges = [r for path, r in catalog_server.faults.requests if path == GERMAN_MODEL]
    assert ranges == [None, "bytes=1000000-", "bytes=2000000-"]

    catalog_server.faults.cut_after[GERMAN_MODEL] = [
        5_000_000
    ]  # cut once more: resumed in the same run
    catalog_server.faults.requests.clear()
    assert voices(config, "install", GERMAN, "--no-build").returncode == 0
    ranges = [r for path, r in catalog_server.faults.requests if path == GERMAN_MODEL]
    assert ranges == ["bytes=3000000-", "bytes=8000000-"]
    folder = tmp_path / "voices" / "de/de_DE/thorsten/medium"
    assert (folder / f"{GERMAN}.onnx").read_bytes() == (mirror / GERMAN_MODEL).read_bytes()


@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MB filesystem (tmpfs), where a voice cannot fit."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)])
    if made.returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_refused_before_the_download(tmp_path, catalog_server, small_disk):
    config = box_config(tmp_path, catalog_server, voices_dir=small_disk / "voices")
    catalog_server.faults.requests.clear()
    result = voices(config, "install", GERMAN, "--no-build")
    assert result.returncode == 1
    assert f"voice '{GERMAN}' needs".encode() in result.stderr
    assert b"are free" in result.stderr
    assert [path for path, _ in catalog_server.faults.requests] == ["voices.json"]


def test_a_disk_that_fills_up_while_writing_names_the_folder(tmp_path, small_disk):
    source = tmp_path / "big.bin"
    data = np.random.default_rng(0).bytes(3_000_000)
    source.write_bytes(data)
    expected = CatalogFile(size_bytes=len(data), md5_digest="0" * 32)
    with pytest.raises(DownloadError, match=f"no space left in {small_disk}"):
        fetch(str(source), small_disk / "big.bin", expected, lambda _count: None)
    assert list(small_disk.iterdir()) == []  # the partial file was removed


def test_install_from_a_local_folder_and_remove(tmp_path, mirror):
    config = tmp_path / "fastvoice.yaml"
    config.write_text(json.dumps({"catalog": {"dir": str(tmp_path / "voices")}}))
    result = voices(config, "install", "--from", str(mirror), GERMAN, "--no-build")
    assert result.returncode == 0, result.stderr
    assert installed(config) == [GERMAN]
    # The box's own voices folder serves another box, as a mirror.
    other = tmp_path / "other.yaml"
    other.write_text(json.dumps({"catalog": {"dir": str(tmp_path / "other-voices")}}))
    copied = voices(other, "install", "--from", str(tmp_path / "voices"), GERMAN, "--no-build")
    assert copied.returncode == 0, copied.stderr
    removed = voices(config, "remove", GERMAN)
    assert removed.returncode == 0 and installed(config) == []
    again = voices(config, "remove", GERMAN)
    assert again.returncode == 2 and b"is not installed" in again.stderr


def test_the_default_voice_cannot_be_removed(tmp_path, mirror):
    config = tmp_path / "fastvoice.yaml"
    config.write_text(json.dumps({"voice": GERMAN, "catalog": {"dir": str(tmp_path / "v")}}))
    assert run_cli("config", "check", str(config)).returncode == 2  # not installed yet
    base = tmp_path / "base.yaml"
    base.write_text(json.dumps({"catalog": {"dir": str(tmp_path / "v")}}))
    assert voices(base, "install", "--from", str(mirror), GERMAN, "--no-build").returncode == 0
    assert run_cli("config", "check", str(config)).returncode == 0
    refused = voices(config, "remove", GERMAN)
    assert refused.returncode == 2 and b"is the default voice" in refused.stderr


def test_a_reinstalled_voice_is_loaded_again_at_the_rescan(tmp_path, mirror):
    from daemon.config import parse_config
    from daemon.runtime.ort_cpu import OrtCpuBackend
    from daemon.voices.catalog import read_catalog
    from daemon.voices.install import install
    from daemon.voices.registry import VoiceRegistry

    config = parse_config({"catalog": {"dir": str(tmp_path / "voices")}})
    entry = read_catalog(str(mirror / "voices.json"))[GERMAN]
    install(config.catalog, entry, str(mirror))
    registry = VoiceRegistry(config, OrtCpuBackend(threads=1))
    first = registry.get(GERMAN)
    assert registry.refresh(config) == ([], []) and registry.get(GERMAN) is first
    install(config.catalog, entry, str(mirror))  # the same voice, its files replaced
    assert registry.refresh(config) == ([], [])
    assert registry.get(GERMAN) is not first


def test_a_catalogue_that_cannot_be_reached_is_a_runtime_failure(tmp_path):
    """Exit 1 (runtime), as a damaged download: 2 is for usage and config errors."""
    from tests.mqtt_helpers import free_port

    config = tmp_path / "fastvoice.yaml"
    closed = f"http://127.0.0.1:{free_port()}/"
    data = {"catalog": {"url": closed + "voices.json", "files_url": closed}}
    config.write_text(json.dumps(data))
    result = voices(config, "install", GERMAN)
    assert result.returncode == 1
    assert b"cannot connect" in result.stderr
