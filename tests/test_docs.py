"""The documentation site builds strictly (every link and page resolves), and its configuration
reference, written from the config models at build time, names every key the models accept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from daemon.settings import leaf_keys
from tests.conftest import REPO


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
