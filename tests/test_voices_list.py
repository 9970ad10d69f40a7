"""`fastvoice voices list` on a box that cannot reach the catalogue (its server is not there):
what is on the box and what the installed extras bring is listed, and the catalogue is said to
be out of reach; the names of the voices an extra brings are found without the catalogue."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.voices.bundled import available
from tests.conftest import run_cli
from tests.mqtt_helpers import free_port

EMBEDDED = "en_US-joe-medium"


def offline_box(directory: Path) -> Path:
    """A box's config whose catalogue is at a port nothing listens on."""
    closed = f"http://127.0.0.1:{free_port()}/"
    config = directory / "fastvoice.yaml"
    data = {
        "catalog": {"url": closed + "voices.json", "files_url": closed, "dir": str(directory)},
        "runtime": {"artifact_dir": str(directory / "artifacts")},
    }
    config.write_text(json.dumps(data))
    return config


def test_an_offline_box_lists_its_own_voices_and_its_extras_and_says_so(tmp_path):
    bundled = sorted(available())
    assert bundled, "the test environment has the kokoro extra"
    config = offline_box(tmp_path)
    listed = run_cli("voices", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    said = listed.stdout.decode()
    assert f"{EMBEDDED}*" in said and all(name in said for name in bundled)
    assert b"the catalogue is out of reach" in listed.stderr
    assert b"cannot connect" in listed.stderr
    rows = json.loads(run_cli("voices", "list", "--json", "--config", str(config)).stdout)
    installed = {row["name"]: row["installed"] for row in rows}
    assert installed == {EMBEDDED: True, **{name: False for name in bundled}}
    japanese = run_cli("voices", "list", "--language", "ja", "--json", "--config", str(config))
    assert [row["name"] for row in json.loads(japanese.stdout)] == bundled


def test_the_installed_list_names_the_voices_an_extra_brings(tmp_path):
    """They install with no download: `--installed` lists only what is installed, and names
    them below, so that a box that never reached a catalogue finds them."""
    listed = run_cli("voices", "list", "--installed", "--config", str(offline_box(tmp_path)))
    assert listed.returncode == 0, listed.stderr
    said = listed.stdout.decode()
    assert f"{EMBEDDED}*" in said
    assert (
        f"installable with no download (installed extras): {', '.join(sorted(available()))}" in said
    )
