"""NVIDIA's real TensorRT Python bindings, loaded over stub native libraries: an API-surface
check (classes, methods, enum members, signatures), never a GPU.

The bindings wheel of each supported version is downloaded once (`pip download`, a few MB) into
a cache folder the tests reuse (`$FASTVOICE_TEST_CACHE`, default ~/.cache/fastvoice-tests). Its
extension module needs libnvinfer, libnvonnxparser and libnvinfer_plugin for nine entry points
only; a stub that defines them and returns null, compiled here with `cc`, lets it import. Creating
a builder or a runtime then fails (the stub returns null): only the API surface is real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The supported range's ends and the last 10.x: JetPack 6.1/6.2's 10.3, the newest 10.x and 11.x.
VERSIONS = {
    "10.3.0": "tensorrt-cu12-bindings",
    "10.16.1.11": "tensorrt-cu12-bindings",
    "11.4.0.106": "tensorrt-cu13-bindings",
}
ENTRY_POINTS = """
void *createInferBuilder_INTERNAL(void *logger, int version) { return 0; }
void *createInferRefitter_INTERNAL(void *engine, void *logger, int version) { return 0; }
void *createInferRuntime_INTERNAL(void *logger, int version) { return 0; }
void *createNvOnnxParser_INTERNAL(void *network, void *logger, int version) { return 0; }
void *createNvOnnxParserRefitter_INTERNAL(void *refitter, void *logger, int version) { return 0; }
void *getBuilderPluginRegistry(int capability) { return 0; }
int getNvOnnxParserVersion(void) { return 0; }
void *getPluginRegistry(void) { return 0; }
int initLibNvInferPlugins(void *logger, const char *namespace_) { return 0; }
"""
LIBRARIES = ("libnvinfer", "libnvonnxparser", "libnvinfer_plugin")


def cache_root() -> Path:
    return Path(os.environ.get("FASTVOICE_TEST_CACHE", Path.home() / ".cache/fastvoice-tests"))


@dataclass(frozen=True)
class Bindings:
    version: str
    site: Path  # holds the tensorrt_bindings package
    libraries: Path  # the stub libnvinfer.so.N and friends

    def run(self, script: str, *args: str) -> dict:
        """Runs `script` (Python, with `trt` bound to the bindings and `ARGS` to `args`) in a
        process of its own; returns the JSON object it prints last."""
        prelude = (
            "import json, sys\n"
            "import tensorrt_bindings as trt\n"
            "sys.modules['tensorrt'] = trt\n"
            "ARGS = sys.argv[1:]\n"
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(self.site), str(REPO)]),
            "LD_LIBRARY_PATH": str(self.libraries),
        }
        done = subprocess.run(
            [sys.executable, "-c", prelude + script, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])


def bindings(version: str) -> Bindings:
    """The bindings of `version`, fetched and prepared on first use."""
    home = cache_root() / "tensorrt-bindings" / version
    if not (home / "ready").is_file():
        _prepare(version, home)
    return Bindings(version, home / "site", home / "lib")


def _prepare(version: str, home: Path) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=home.parent))
    try:
        package = VERSIONS[version]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                f"{sys.version_info.major}.{sys.version_info.minor}",
                "--platform",
                "manylinux_2_28_x86_64",
                "--platform",
                "manylinux_2_17_x86_64",
                f"{package}=={version}",
                "--dest",
                str(work / "wheel"),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (wheel,) = (work / "wheel").glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(work / "site")
        major = version.split(".")[0]
        (work / "lib").mkdir()
        source = work / "entry_points.c"
        source.write_text(ENTRY_POINTS)
        for library in LIBRARIES:
            name = f"{library}.so.{major}"
            subprocess.run(
                [
                    "cc",
                    "-shared",
                    "-fPIC",
                    f"-Wl,-soname,{name}",
                    "-o",
                    work / "lib" / name,
                    source,
                ],
                check=True,
                capture_output=True,
            )
        (work / "ready").write_text(version)
        shutil.rmtree(home, ignore_errors=True)
        os.replace(work, home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
