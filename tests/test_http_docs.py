"""The shell commands docs/http.md shows, run as a reader would run them (their placeholders
filled in) against a running service, so that an example the server refuses cannot stay in
the docs."""

from __future__ import annotations

import json
import os
import re
import subprocess

from tests.conftest import REPO
from tests.test_http import TOKEN, service  # noqa: F401 (the running service: a fixture)

DOCUMENTED_URL = "http://127.0.0.1:8080"


def documented_command(marker: str) -> str:
    """The command of docs/http.md's shell example that holds `marker` (continued lines
    joined)."""
    page = (REPO / "docs" / "http.md").read_text()
    block = re.search(r"```sh\n(.*?)```", page, re.S)
    assert block is not None, "docs/http.md has no shell example"
    commands = re.sub(r"\\\n\s*", "", block.group(1)).splitlines()
    return next(command for command in commands if marker in command)


def test_the_documented_streamed_answer_is_spoken(service):  # noqa: F811 (the fixture)
    answer = "The doors open at eight. The shop closes at six. "
    command = documented_command("/api/say/stream")
    assert "my-assistant --stream |" in command and DOCUMENTED_URL in command
    command = command.replace("my-assistant --stream", f"printf '{answer}'")
    command = command.replace(DOCUMENTED_URL, service.url)
    ran = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        env={**os.environ, "TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    queued = json.loads(ran.stdout)
    assert queued["characters"] == len(answer), queued
    assert queued["text_ended_by"] == "the end of the body"
    service.recorder.event(queued["id"], "finished")
