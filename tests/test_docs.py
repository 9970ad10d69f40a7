"""The documentation site builds strictly (every link and page resolves), and its configuration
reference, written from the config models at build time, names every key the models accept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.service.settings import leaf_keys
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # builds the documentation site


def test_the_site_builds_strictly_with_every_config_key(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    page = (tmp_path / "site" / "configuration" / "index.html").read_text(encoding="utf-8")
    missing = sorted(key for key in leaf_keys() if f"<code>{key}" not in page)
    assert not missing, missing
    for name in ("install", "voices", "troubleshooting", "mqtt", "performance"):
        assert (tmp_path / "site" / name / "index.html").is_file()


def test_the_hook_reads_the_models_from_the_checkout_without_an_install(tmp_path):
    """`mkdocs build` needs mkdocs-material and pydantic, not fastvoice installed: the hook is run
    with the site packages on the path but without the editable install's path entries (-S)."""
    import sysconfig

    hook = str(REPO / "tools/docs_hooks.py")
    code = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('hooks', {hook!r})\n"
        "hooks = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(hooks)\n"
        "print(hooks.reference().splitlines()[2])\n"
    )
    site = sysconfig.get_paths()["purelib"]
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": site},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-1000:]
    assert result.stdout.startswith("| `")


def test_the_voices_page_shows_a_catalogue_the_box_reads():
    import json
    import re

    from daemon.voices.catalog import parse_catalog

    page = (REPO / "docs/voices.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", page, flags=re.DOTALL)
    entries = parse_catalog(json.loads(blocks[0]), "docs/voices.md")
    entry = entries["de_DE-thorsten-medium"]
    assert entry.model_file == "de_DE-thorsten-medium.onnx" and entry.size_bytes > 0


def test_topics_and_readme_sections_the_docs_name_exist():
    import re

    from daemon.service.outbox import Outbox

    events = Outbox("fleet/box").topic("events").rsplit("/", 1)[1]
    pages = {path.name: path.read_text(encoding="utf-8") for path in (REPO / "docs").glob("*.md")}
    for name, page in pages.items():
        for suffix in re.findall(r"`<fleet>/\+/(\w+)`", page):
            assert suffix == events, f"{name}: <fleet>/+/{suffix}"
    headings = [line.lstrip("# ") for line in (REPO / "README.md").read_text().splitlines()
                if line.startswith("## ")]  # fmt: skip
    for name, page in pages.items():
        for section in re.findall(r"the README's (\w+)", page):
            assert any(section in heading for heading in headings), f"{name}: README's {section}"


def test_the_units_exposure_quoted_in_the_docs_is_the_measured_one(tmp_path):
    import re

    unit = (REPO / "systemd/fastvoice.service").read_text()
    executable = Path(sys.executable).parent / "fastvoice"
    (tmp_path / "fastvoice.service").write_text(
        unit.replace("/opt/fastvoice/.venv/bin/fastvoice", str(executable))
    )
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(tmp_path / "fastvoice.service")],
        capture_output=True,
        text=True,
    )
    measured = re.search(
        r"Overall exposure level for fastvoice.service: ([0-9.]+)", security.stdout
    )
    assert measured is not None, security.stdout[-300:]
    quoted = [
        (path.name, float(figure))
        for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
        for figure in re.findall(
            r"systemd-analyze security.{0,80}?(?:reports|scores) ([0-9]\.[0-9])",
            path.read_text(encoding="utf-8").replace("\n", " "),
        )
    ]
    assert quoted and all(figure == float(measured.group(1)) for _, figure in quoted), quoted
