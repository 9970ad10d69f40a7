"""The tests never talk to a service of the user's or of the box's: `fastvoice say`, as the tests
run it, hands its job to a service only through a socket inside this test run's own directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from daemon.local_socket import client_socket_paths, service_socket_path


def test_the_cli_and_the_services_of_the_tests_use_only_the_runs_own_sockets():
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    assert runtime is not None, "the user's runtime directory (or none) is the CLI's to search"
    run_directory = Path(runtime)
    assert run_directory.is_relative_to(tempfile.gettempdir()), run_directory
    found = [*client_socket_paths(), service_socket_path()]
    outside = [path for path in found if path is None or not path.is_relative_to(run_directory)]
    assert not outside, f"a test would reach a service at {outside}"
