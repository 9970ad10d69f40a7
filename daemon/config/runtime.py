"""`runtime` and `gpu`: which backend runs the voices' graphs, with how many threads and
workers, at which precision, and the GPU's memory budget and engine profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from daemon.config.base import StrictModel, resolve_path


# Restart-only, every key: marked where Config declares `runtime`.
class RuntimeConfig(StrictModel):
    backend: Literal["auto", "trt", "ort-trt", "ort-cuda", "ort-cpu"] = Field(
        "auto",
        description="auto: a TensorRT engine where TensorRT, a GPU and a fitting engine are "
        "present, else ort-cuda, else ort-cpu; a named one that cannot run falls down that "
        "chain, saying why",
    )
    threads: Literal["auto"] | Annotated[int, Field(ge=1, le=256)] = Field(
        "auto", description="intra-op threads of a run alone; auto = physical cores available"
    )
    workers: Literal["auto"] | Annotated[int, Field(ge=1, le=64)] = Field(
        "auto",
        description="requests synthesized at once by `serve` (each with threads / workers); "
        "auto = physical cores available",
    )
    yield_busy_cores: bool = Field(
        True,
        description="each run takes only the cores other processes leave free (a load that "
        "held through the last 0.3 s, from the kernel's CPU counters): on a box that also runs "
        "Home Assistant or a recorder, a run on every core waits for the busy one",
    )
    precision: Literal["auto", "exact", "fp32", "fp16", "int8"] = Field(
        "auto",
        description="auto: the fastest variant that passes `fastvoice build`'s quality gate "
        "(approximate audio a listener cannot tell from the exact); exact: the graph as the "
        "voice ships it and audio bit-exact to its own decode",
    )
    artifacts: bool = Field(True, description="load what `fastvoice build` made for this box")
    build_on_start: bool = Field(
        True, description="`fastvoice serve` builds missing artifacts before it loads the voices"
    )
    artifact_dir: Path | None = Field(
        None, description="where artifacts live; default: systemd's CacheDirectory or ~/.cache"
    )

    _resolve = field_validator("artifact_dir")(resolve_path)


class DimRange(StrictModel):
    """One dynamic dimension of the voices' graphs, as TensorRT optimisation profiles see it."""

    min: int = Field(ge=1, le=1_000_000)
    opt: int = Field(ge=1, le=1_000_000)
    max: int = Field(ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _ordered(self) -> DimRange:
        if not self.min <= self.opt <= self.max:
            raise ValueError(f"needs min <= opt <= max, got {self.min}, {self.opt}, {self.max}")
        return self


def _default_profiles() -> dict[str, DimRange]:
    # A VITS encoder reads phoneme ids (about 2 per character: 400 characters fit in 1024); its
    # decoder reads latent frames (86 per second of audio; streaming windows are at most
    # 1024 + 2 x 16 context frames). A CosyVoice 2 estimator and vocoder read mel frames (50 per
    # second: 1500 is 30 s, where an estimator context already takes about 2 GB) and HiFT's source
    # 480 samples per frame. A Kokoro graph reads tokens (a phrase's phonemes and two pads, at
    # most 510).
    return {
        "phonemes": DimRange(min=1, opt=128, max=1024),
        "frames": DimRange(min=1, opt=256, max=1056),
        "mel_frames": DimRange(min=4, opt=500, max=1500),
        "samples": DimRange(min=1920, opt=240_000, max=720_000),
        "sequence_length": DimRange(min=3, opt=64, max=510),
    }


# Restart-only, every key: marked where Config declares `gpu`.
class GpuConfig(StrictModel):
    """The GPU backends: which device, how much of its memory, and how engines are built."""

    device: int = Field(0, ge=0, le=63, description="CUDA device index")
    vram_budget_mb: float = Field(
        1024.0,
        gt=0,
        le=1_048_576,
        description="GPU memory this service may use: the CUDA context, engine weights, "
        "execution memory and ONNX Runtime arenas together",
    )
    cuda_context_mb: float = Field(
        256.0,
        ge=0,
        le=65_536,
        description="what the budget sets aside for the CUDA context until it is measured "
        "(NVML); where NVML cannot see the device (some Jetsons) this figure stands",
    )
    precision: Literal["fp16", "fp32"] = Field("fp16", description="TensorRT engine precision")
    max_batch: int = Field(1, ge=1, le=64, description="largest batch an engine is built for")
    profiles: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")], DimRange] = (
        Field(
            default_factory=_default_profiles,
            description="min/opt/max of each named dynamic dimension of the graphs",
        )
    )
    profile_levels: int = Field(
        3,
        ge=1,
        le=6,
        description="profiles per engine (max, max/2, ...): a tight budget loads a smaller one",
    )
    builder_optimization_level: int = Field(3, ge=0, le=5, description="TensorRT builder effort")
    workspace_fraction: float = Field(
        0.5, gt=0, le=1, description="share of the budget the builder may use as workspace"
    )

    @property
    def budget_bytes(self) -> int:
        return int(self.vram_budget_mb * 2**20)

    @property
    def context_bytes(self) -> int:
        return int(self.cuda_context_mb * 2**20)
