"""Every dependency of `[cpu]` and `[cpu,kokoro]` installs on the boxes without a compiler.

A box (a Jetson container, Raspberry Pi OS Lite) has no compiler, so each package must come as
a wheel for its platform and Python. pip's resolver is asked, for each box class below, to
install the extras from wheels only (`--dry-run`: nothing is installed), with every manylinux
tag the box's glibc takes. One exception is allowed and checked: a pure-Python source package
(num2words asks for docopt, which is published only as source) is built here into a
`py3-none-any` wheel first, which proves it holds no native code. Run by CI (.ci/run); exits 1
naming the box class and pip's complaint.

What it does not see: pip evaluates environment markers (`python_version`, `platform_machine`)
as on this host, so a dependency only a Python 3.10 or an aarch64 box asks for is not resolved
here. The aarch64 stage (tools/ci-aarch64.sh) installs for real on aarch64 with Python 3.11.

    python3 tools/check_wheels.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent


def manylinux(machine: str, glibc_minor: int) -> tuple[str, ...]:
    """Every manylinux tag a box with glibc 2.`glibc_minor` installs (pip takes them as given)."""
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(glibc_minor, 16, -1)]
    return (*tags, f"manylinux2014_{machine}")


# (the box class, pip's platform tags, Python version): JetPack 6 (Ubuntu 22.04, glibc 2.35)
# ships Python 3.10; Raspberry Pi OS and Debian 12 (glibc 2.36) Python 3.11.
BOXES = (
    ("x86_64 (Debian 12), Python 3.11", manylinux("x86_64", 36), "3.11"),
    ("aarch64 (Jetson, JetPack 6), Python 3.10", manylinux("aarch64", 35), "3.10"),
    ("aarch64 (Raspberry Pi 5, Debian 12), Python 3.11", manylinux("aarch64", 36), "3.11"),
)
EXTRAS = (("cpu",), ("cpu", "kokoro"))
PURE_PYTHON_SOURCES = ("docopt",)


def requirements(extras: tuple[str, ...]) -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = list(project["dependencies"])
    for extra in extras:
        found += project["optional-dependencies"][extra]
    return found


def pure_python_wheels(directory: Path) -> None:
    """Builds the allowed source packages into wheels, and fails if one is not pure Python."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(directory), *PURE_PYTHON_SOURCES], check=True
    )
    for wheel in directory.glob("*.whl"):
        if not wheel.name.endswith("-none-any.whl"):
            sys.exit(f"check_wheels: {wheel.name} is not pure Python: a box cannot build it")


def unresolved(box: tuple[str, tuple[str, ...], str], extras: tuple[str, ...], local: Path) -> str:
    """pip's complaint when `extras` cannot be installed from wheels on `box`, else ''."""
    _, platforms, python = box
    command = [
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "install",
        "--dry-run",
        "--quiet",
        "--ignore-installed",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--target",
        str(local / "target"),
        "--find-links",
        str(local),
    ]
    for platform in platforms:
        command += ["--platform", platform]
    done = subprocess.run([*command, *requirements(extras)], capture_output=True, text=True)
    if done.returncode == 0:
        return ""
    errors = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")]
    return "\n".join(errors[-8:])


def main() -> int:
    failed = False
    with tempfile.TemporaryDirectory() as temp:
        local = Path(temp)
        pure_python_wheels(local)
        asked = [(box, extras) for box in BOXES for extras in EXTRAS]
        # Side by side: each resolve mostly waits on the package index.
        with ThreadPoolExecutor(len(asked)) as pool:
            complaints = pool.map(lambda pair: unresolved(*pair, local), asked)
            for (box, extras), complaint in zip(asked, complaints, strict=True):
                label = f"[{','.join(extras)}] on {box[0]}"
                print(f"check_wheels: {label}: {'from wheels' if not complaint else 'FAILS'}")
                if complaint:
                    failed = True
                    print(complaint, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
