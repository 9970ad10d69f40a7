"""The CPU classes fastvoice is built for, and the precision variants `precision: auto` tries on
each. A variant is worth building and judging only where ONNX Runtime's CPU kernels can make it
faster: the quality gate still measures every one it tries, side by side, on the box itself.

The builder is told its class (`this_cpu()` by default), so each class's decisions are tested
on any host; the kernels that run are always the host's.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from daemon.runtime.artifacts import cpu_features


@dataclass(frozen=True)
class CpuClass:
    """A kind of box by what its CPU's kernels can use (runtime.artifacts.KERNEL_FEATURES)."""

    name: str
    arch: str
    features: frozenset[str]
    boxes: str  # which boxes we sell are of this class, for a reader

    def describe(self) -> str:
        """The class and its flags, as a build's record says it."""
        return f"{self.name} ({', '.join(sorted(self.features)) or 'no SIMD flags'})"


_AVX2 = frozenset({"avx2", "fma"})
_AVX512 = _AVX2 | {"avx512f"}
_NEON = frozenset({"asimd"})
CLASSES: dict[str, CpuClass] = {
    c.name: c
    for c in (
        CpuClass("x86-avx2", "x86_64", _AVX2, "mini-PCs: Intel Core before Ice Lake, AMD Zen 1-3"),
        CpuClass("x86-avx512", "x86_64", _AVX512, "Skylake-SP servers"),
        CpuClass(
            "x86-avx512-vnni",
            "x86_64",
            _AVX512 | {"avx512_vnni"},
            "Ice Lake and Cascade Lake Xeons, Ice/Tiger Lake mini-PCs",
        ),
        CpuClass(
            "x86-avx512-bf16",
            "x86_64",
            _AVX512 | {"avx512_vnni", "avx512_bf16"},
            "AMD Zen 4 and 5, Cooper Lake",
        ),
        CpuClass(
            "x86-amx",
            "x86_64",
            _AVX512 | {"avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"},
            "Sapphire Rapids and later Xeons",
        ),
        CpuClass(
            "aarch64-dotprod-fp16",
            "aarch64",
            _NEON | {"asimdhp", "asimddp"},
            "Jetson Orin (Cortex-A78AE), Raspberry Pi 5 (Cortex-A76)",
        ),
        CpuClass("aarch64", "aarch64", _NEON, "Raspberry Pi 4 (Cortex-A72)"),
    )
}


def classify(arch: str, features: frozenset[str]) -> CpuClass:
    """The richest class whose features this CPU has: its decisions are the class's, whatever
    else the CPU has (a CPU of no class: one with no features, which tries int8 alone)."""
    fitting = [c for c in CLASSES.values() if c.arch == arch and c.features <= features]
    if not fitting:
        return CpuClass(f"{arch or 'unknown'}-unclassified", arch, frozenset(), "not a class")
    return max(fitting, key=lambda c: len(c.features))


def this_cpu() -> CpuClass:
    """The host's class."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower())
    return classify(arch or platform.machine(), frozenset(cpu_features()))


@dataclass(frozen=True)
class Candidate:
    """A precision variant `auto` builds and judges, and the modules its making imports (each
    from a distribution that `fastvoice[cpu]` installs: tests/test_cpu_classes.py checks)."""

    precision: str
    modules: tuple[str, ...]


INT8 = Candidate("int8", ("onnx", "onnxruntime.quantization"))
FP16 = Candidate("fp16", ("onnx", "onnxruntime.transformers.float16"))


def vits_candidates(cpu: CpuClass) -> tuple[tuple[Candidate, ...], dict[str, str]]:
    """(what a Piper voice's `auto` tries on `cpu`, why each other variant is not tried).

    int8 everywhere: ONNX Runtime's dynamic int8 has kernels on every class (AVX2's
    vpmaddubsw, VNNI's vpdpbusd, AMX tiles, NEON and its dot products). fp16 only where the CPU
    computes in fp16 (ARMv8.2's asimdhp, which MLAS's fp16 kernels use): an x86 CPU runs an
    fp16 graph's convolutions through casts to fp32 (the embedded voice's fp16 measured 1.01x
    fp32's time on an AVX-512 BF16 box, within 5 % either way on AVX2 ones), so building and
    judging it there only costs the build time. bf16 is in no class's list: ONNX Runtime's CPU
    kernels have no bf16 convolution, and OpenVINO's (2026.4, the one CPU runtime that has them)
    measured no lever for a streaming decoder: on an AVX-512 BF16 box joe's decoder in bf16
    took 0.76-0.88x ONNX Runtime's time on windows of 40-300 frames run again at one shape
    (42 dB SNR), but each new window length costs its first run 20-25 ms more (2-3x on a
    40-frame window), and a streamed sentence's windows are all of new lengths (issue 54)."""
    not_tried = {"bf16": "ONNX Runtime's CPU kernels have no bf16 convolution"}
    if "asimdhp" in cpu.features:
        return (FP16, INT8), not_tried
    not_tried["fp16"] = f"no fp16 arithmetic on {cpu.name}: its kernels would cast to fp32"
    return (INT8,), not_tried


def kokoro_candidates(cpu: CpuClass) -> tuple[tuple[Candidate, ...], dict[str, str]]:
    """(what a Kokoro voice's `auto` tries on `cpu`, why each other variant is not tried): its
    static int8 on every class (edge_build.kokoro_precision; judged by PESQ, so refused by name
    where the `gate` extra is missing). The published graph's convolutions are int8 already."""
    return (INT8,), {
        "fp16": "the published graph's convolutions are int8 already (ConvInteger)",
        "bf16": "ONNX Runtime's CPU kernels have no bf16 convolution; OpenVINO's bf16 of the "
        "graph (decoder folded to fp32) scored wideband PESQ 1.1 against the published graph, "
        "its f32 2.9-3.8 (issue 54)",
    }
