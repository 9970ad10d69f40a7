"""`fastvoice build`: make (or check) the artifacts of every configured voice for this box, each
voice by its family's builder: the CPU artifacts always (the last backend of every chain), and on
a box with an NVIDIA GPU the GPU ones too."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from daemon.config import Config, CosyVoice2VoiceConfig, KokoroVoiceConfig, VitsVoiceConfig
from daemon.errors import error_text
from daemon.voices.registry import voice_configs
from edge_build.artifact_writer import BuildResult
from edge_build.cpu_classes import CpuClass
from edge_build.vits_builder import VitsBuilder

if TYPE_CHECKING:  # the GPU steps and CosyVoice are imported where used: the service's
    # start-up check of its artifacts needs neither
    from daemon.runtime.gpu import GpuStack
    from edge_build.gpu_steps import EngineBuilder, GpuSteps

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


class VoiceBuilder(Protocol):
    name: str

    def build_cpu(
        self, *, precision: str, force: bool, verify: bool, progress: Progress
    ) -> list[BuildResult]: ...

    def build_gpu(self, steps: GpuSteps) -> list[BuildResult]: ...

    def missing(self, precision: str) -> list[str]: ...


def builders(config: Config, store: Path, cpu: CpuClass | None = None) -> list[VoiceBuilder]:
    """Each voice's builder, by the type of its settings; `cpu`: the class of box whose
    precision candidates they try (default: this one's)."""
    made: list[VoiceBuilder] = []
    for name, voice in sorted(voice_configs(config).items()):
        if isinstance(voice, VitsVoiceConfig):
            made.append(VitsBuilder(name, voice, store, cpu))
        elif isinstance(voice, KokoroVoiceConfig):
            from edge_build.kokoro_builder import KokoroBuilder

            made.append(KokoroBuilder(name, voice, store, cpu))
        elif isinstance(voice, CosyVoice2VoiceConfig):
            from edge_build.cosyvoice2_builder import CosyVoice2Builder

            made.append(CosyVoice2Builder(name, voice, store))
    return made


def builder_for(config: Config, store: Path, name: str) -> VoiceBuilder:
    """The builder of one voice (configured or installed)."""
    return next(builder for builder in builders(config, store) if builder.name == name)


def build_voices(
    config: Config,
    store: Path,
    force: bool = False,
    verify: bool = False,
    progress: Progress | None = None,
    cpu: CpuClass | None = None,
) -> list[BuildResult]:
    """`verify` also checks every file's sha256; `progress` hears what a long build is doing;
    `cpu`: the class of box whose precision candidates are tried (default: this one's)."""
    progress = progress or log.info
    results = build_cpu_voices(config, store, force, verify, progress, cpu)
    if config.runtime.backend != "ort-cpu" and config.runtime.artifacts:
        from daemon.runtime.gpu import probe

        stack = probe(config.gpu.device)
        if stack.device is not None:
            results += build_gpu_voices(config, store, stack, force, verify, progress)
    return results


def build_cpu_voices(
    config: Config,
    store: Path,
    force: bool = False,
    verify: bool = False,
    progress: Progress = log.info,
    cpu: CpuClass | None = None,
) -> list[BuildResult]:
    precision = config.runtime.precision
    return each_voice(
        builders(config, store, cpu),
        store,
        lambda builder: builder.build_cpu(
            precision=precision, force=force, verify=verify, progress=progress
        ),
    )


def each_voice(
    voice_builders: list[VoiceBuilder],
    store: Path,
    build: Callable[[VoiceBuilder], list[BuildResult]],
) -> list[BuildResult]:
    """Builds voice by voice: one whose files cannot be read is reported `failed: ...` and
    the others are still built (the service quarantines it)."""
    results: list[BuildResult] = []
    for builder in voice_builders:
        try:
            results += build(builder)
        except Exception as error:  # whatever a voice's damaged files make a builder raise
            message = error_text(error)
            log.error("voice %s: cannot be built: %s", builder.name, message)
            results.append(BuildResult(builder.name, builder.name, f"failed: {message}", store, 0))
    return results


def build_gpu_voices(
    config: Config,
    store: Path,
    stack: GpuStack,
    force: bool = False,
    verify: bool = False,
    progress: Progress | None = None,
    engine_builder: EngineBuilder | None = None,
) -> list[BuildResult]:
    """`engine_builder` builds one engine (default: TensorRT's; a test passes a fake where no
    GPU is at hand)."""
    from edge_build.gpu_steps import GpuSteps

    if engine_builder is None:
        from edge_build.trt_engine import build_engine as engine_builder
    steps = GpuSteps(
        gpu=config.gpu,
        stack=stack,
        store=store,
        force=force,
        verify=verify,
        progress=progress or log.info,
        engine_builder=engine_builder,
        engines=config.runtime.backend in ("auto", "trt") and stack.engines_possible,
    )
    return each_voice(builders(config, store), store, lambda builder: builder.build_gpu(steps))


def missing_artifacts(config: Config, store: Path, gpu: bool) -> list[str]:
    """What a build would make now, found without building: empty when the service can load
    at once (a lookup finds only intact artifacts: each file's size and checksum are checked).
    On a box with a GPU backend in play (`gpu`) the engines are always named: only a build can
    check them."""
    if gpu:
        return ["the GPU engines"]
    precision = config.runtime.precision
    missing = []
    for builder in builders(config, store):
        try:
            missing += builder.missing(precision)
        except Exception as error:  # a damaged voice: it is quarantined when it is loaded
            log.warning("voice %s: artifacts not checked: %s", builder.name, error)
    return missing
