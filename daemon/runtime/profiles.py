"""Optimisation profiles: the min/opt/max shape of every graph input, from the graph's named
dimensions and config `gpu.profiles`.

Both the native TensorRT builder and ONNX Runtime's TensorRT provider build for these shapes, so
an engine never meets a shape it was not built for. A profile ladder (level 0 at the configured
max, each further level at half the one before) lets a tight budget load a smaller profile
instead of giving up the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from daemon.config import DimRange, GpuConfig
from daemon.errors import BackendError

Shape = tuple[int, ...]


@dataclass(frozen=True)
class InputProfile:
    name: str
    min: Shape
    opt: Shape
    max: Shape


@dataclass(frozen=True)
class Profile:
    level: int
    inputs: tuple[InputProfile, ...]
    max_dims: dict[str, int]  # the named dimensions' largest values at this level

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "max_dims": self.max_dims,
            "inputs": {i.name: {"min": i.min, "opt": i.opt, "max": i.max} for i in self.inputs},
        }

    def ort_trt_options(self) -> dict[str, str]:
        """The same shapes as ONNX Runtime's TensorRT provider options."""

        def spell(pick) -> str:
            return ",".join(f"{i.name}:{'x'.join(map(str, pick(i)))}" for i in self.inputs)

        return {
            "trt_profile_min_shapes": spell(lambda i: i.min),
            "trt_profile_opt_shapes": spell(lambda i: i.opt),
            "trt_profile_max_shapes": spell(lambda i: i.max),
        }


def is_batch_dim(name: str) -> bool:
    return "batch" in name.lower()


def graph_inputs(model_path: Path) -> list[tuple[str, list[int | str]]]:
    """Each input's name and dimensions (ints, or the names of dynamic ones)."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if not dims:
            raise BackendError(
                f"{model_path.name}: input {value.name!r} has no shape; an engine needs its rank"
            )
        inputs.append((value.name, [d.dim_param or d.dim_value or "?" for d in dims]))
    return inputs


def profile_ladder(model_path: Path, gpu: GpuConfig) -> list[Profile]:
    """Profiles for `model_path`'s inputs, largest first (`gpu.profile_levels` of them, fewer
    when halving would go below a dimension's min)."""
    inputs = graph_inputs(model_path)
    ranges: dict[str, DimRange] = {}
    for name, dims in inputs:
        for axis, dim in enumerate(dims):
            if isinstance(dim, int):
                continue
            if is_batch_dim(dim):
                ranges[dim] = DimRange(min=1, opt=1, max=gpu.max_batch)
            elif dim in gpu.profiles:
                ranges[dim] = gpu.profiles[dim]
            else:
                known = ", ".join(sorted(gpu.profiles)) or "none"
                raise BackendError(
                    f"{model_path.name}: input {name!r} axis {axis} is dynamic ({dim!r}) and "
                    f"gpu.profiles has no {dim!r} (it has: {known}); add one"
                )
    ladder: list[Profile] = []
    for level in range(gpu.profile_levels):
        scaled = {
            dim: DimRange(min=full.min, opt=min(full.opt, top), max=top)
            for dim, full in ranges.items()
            if (top := max(full.min, full.max >> level))
        }
        profile = _profile(level, inputs, scaled)
        if ladder and profile.max_dims == ladder[-1].max_dims:
            break  # every dimension is at its min already: nothing left to shrink
        ladder.append(profile)
    return ladder


def _profile(
    level: int, inputs: list[tuple[str, list[int | str]]], ranges: dict[str, DimRange]
) -> Profile:
    def shape(dims: list[int | str], pick: str) -> Shape:
        return tuple(d if isinstance(d, int) else getattr(ranges[d], pick) for d in dims)

    return Profile(
        level=level,
        inputs=tuple(
            InputProfile(name, shape(dims, "min"), shape(dims, "opt"), shape(dims, "max"))
            for name, dims in inputs
        ),
        max_dims={dim: r.max for dim, r in ranges.items()},
    )
