"""The TensorRT code held to NVIDIA's real Python bindings of every supported version (loaded over
stub libraries: the API surface, never a GPU; see tests/tensorrt_bindings.py).

Where a check reads our source (the names it reaches through `trt`, that a call's bool result is
tested), it is because the bindings cannot run those calls here: over stub libraries they load
and describe themselves, but build and execute nothing. On a GPU box tests/test_gpu_device.py
runs the same code for real."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.tensorrt_bindings import REPO, VERSIONS, bindings

TENSORRT_MODULES = (
    "edge_build/trt_engine.py",
    "daemon/runtime/trt.py",
    "daemon/runtime/trt_memory.py",
)
# The methods our code calls on TensorRT's objects (which the names above cannot reach), by
# class. A name the code reaches only behind hasattr/getattr is not listed: it may be absent.
METHODS = {
    "Builder": ["create_network", "create_builder_config", "create_optimization_profile"],
    "Builder.build_serialized_network": [],
    "INetworkDefinition": ["num_layers", "get_layer"],
    "OnnxParser": ["parse_from_file", "get_error", "num_errors"],
    "IBuilderConfig": [
        "set_memory_pool_limit",
        "builder_optimization_level",
        "set_flag",
        "add_optimization_profile",
        "create_timing_cache",
        "set_timing_cache",
        "progress_monitor",
        "get_timing_cache",
    ],
    "IOptimizationProfile": ["set_shape"],
    "ITimingCache": ["serialize"],
    "IHostMemory": ["nbytes"],
    "ILayer": ["type", "precision", "num_outputs", "get_output_type", "set_output_type"],
    "IUnaryLayer": ["op"],
    "IElementWiseLayer": ["op"],
    "Runtime": ["deserialize_cuda_engine"],
    "ICudaEngine": [
        "num_io_tensors",
        "get_tensor_name",
        "get_tensor_mode",
        "get_tensor_dtype",
        "get_tensor_shape",
        "get_tensor_profile_shape",
        "create_execution_context",
        "get_device_memory_size_for_profile_v2",
    ],
    "IExecutionContext": [
        "set_optimization_profile_async",
        "set_input_shape",
        "get_tensor_shape",
        "set_output_allocator",
        "set_tensor_address",
        "execute_async_v3",
        "set_device_memory",
    ],
}
# Names absent from some supported versions, each used only behind the feature test named
# (which must then be false on those bindings).
FP16_FLAG = "fp16_flag_available(trt)"
STREAM_READER = 'hasattr(trt, "IStreamReaderV2")'
GUARDED = {
    "BuilderFlag.FP16": FP16_FLAG,
    "BuilderFlag.OBEY_PRECISION_CONSTRAINTS": FP16_FLAG,
    "ILayer.precision": FP16_FLAG,
    "ILayer.set_output_type": FP16_FLAG,
    "IStreamReaderV2": STREAM_READER,
    "IStreamReaderV2.__init__": STREAM_READER,
    "SeekPosition": STREAM_READER,
    "SeekPosition.SET": STREAM_READER,
    "SeekPosition.CUR": STREAM_READER,
    "SeekPosition.END": STREAM_READER,
}
GUARDS = """
from edge_build.trt_engine import fp16_flag_available
print(json.dumps({guard: bool(eval(guard)) for guard in ARGS}))
"""


def assert_guarded(tensorrt, missing: list[str]) -> None:
    """Each missing name is one the code reaches only behind its feature test, and that test
    is false on these bindings."""
    assert set(missing) <= set(GUARDED), missing
    source = "\n".join((REPO / m).read_text() for m in TENSORRT_MODULES)
    guards = sorted({GUARDED[name] for name in missing})
    assert all(guard in source for guard in guards)
    if guards:
        assert tensorrt.run(GUARDS, *guards) == dict.fromkeys(guards, False)


# Calls whose bool result says whether TensorRT did it: never ignored.
CHECKED_RESULTS = ("set_optimization_profile_async", "set_input_shape", "execute_async_v3")
# Our subclasses of TensorRT's interfaces: each override's parameters as TensorRT passes them.
OVERRIDES = {
    "IOutputAllocator": ("reallocate_output", "reallocate_output_async", "notify_shape"),
    "IProgressMonitor": ("phase_start", "step_complete", "phase_finish"),
    "IStreamReaderV2": ("read", "seek"),
}


def tensorrt_names(path: Path) -> set[str]:
    """Every name reached through the tensorrt module in `path` (`trt.X.Y`, also through a local
    alias such as `kinds = trt.LayerType`), dotted from the module."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    aliases = {"trt": ""}

    def chain(node: ast.AST) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in aliases:
            return ".".join(filter(None, [aliases[node.id], *reversed(parts)]))
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Attribute):
                resolved = chain(node.value)
                if resolved is not None:
                    aliases[target.id] = resolved
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and not isinstance(parents.get(node), ast.Attribute)
        for name in [chain(node)]
        if name
    }


RESOLVE = """
missing = []
for name in ARGS:
    value = trt
    for part in name.split("."):
        if not hasattr(value, part):
            missing.append(name)
            break
        value = getattr(value, part)
print(json.dumps({"version": trt.__version__, "missing": missing}))
"""

SURFACE = """
import inspect
methods = json.loads(ARGS[0])
checked = json.loads(ARGS[1])
overrides = json.loads(ARGS[2])
missing = [f"{cls}.{name}" for cls, names in methods.items()
           for name in names if not hasattr(getattr(trt, cls.split(".")[0]), name)]

def signature(cls, name):
    # A method's first docstring line; an interface TensorRT calls back documents its
    # methods in the class docstring's example instead.
    method = getattr(getattr(trt, cls), name, None)
    if method is not None and (method.__doc__ or "").strip():
        return method.__doc__.strip().splitlines()[0]
    for line in (getattr(trt, cls).__doc__ or "").splitlines():
        if line.strip().startswith(f"def {name}("):
            return line.strip().removeprefix("def ").rstrip(":")
    return ""

def returns_of(cls, name):
    # Every overload's result type (an overloaded method lists them in its docstring).
    doc = getattr(getattr(trt, cls), name).__doc__ or ""
    return sorted({line.rsplit("->", 1)[1].strip() for line in doc.splitlines()
                   if f"{name}(self" in line and "->" in line})

returns = {name: returns_of("IExecutionContext", name) for name in checked}
parameters = {}
for cls, names in overrides.items():
    if not hasattr(trt, cls):
        continue
    for name in names:
        line = signature(cls, name)
        inside = line[line.index("(") + 1 : line.rindex(")")]
        parameters[f"{cls}.{name}"] = [p.split(":")[0].strip() for p in inside.split(",")][1:]
print(json.dumps({
    "version": trt.__version__,
    "missing": missing,
    "returns": returns,
    "parameters": parameters,
    "host_memory_len": hasattr(trt.IHostMemory, "__len__"),
    "stream_reader_v2": hasattr(trt, "IStreamReaderV2"),
}))
"""


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def tensorrt(request):
    return bindings(request.param)


def test_the_bindings_are_the_real_version(tensorrt):
    assert tensorrt.run(RESOLVE)["version"] == tensorrt.version


def test_every_tensorrt_name_the_code_uses_exists(tensorrt):
    names = sorted(set().union(*(tensorrt_names(REPO / m) for m in TENSORRT_MODULES)))
    assert "LayerType.SOFTMAX" in names and "Logger.WARNING" in names  # the scan sees aliases
    assert_guarded(tensorrt, tensorrt.run(RESOLVE, *names)["missing"])


def test_the_methods_the_code_calls_exist_and_their_results_are_checked(tensorrt):
    import json

    source = "\n".join((REPO / m).read_text() for m in TENSORRT_MODULES)
    for name in {n for names in METHODS.values() for n in names} | set(CHECKED_RESULTS):
        assert re.search(rf"\.{name}\b", source), f"{name} is listed but no longer used"
    found = tensorrt.run(
        SURFACE,
        json.dumps({k: v for k, v in METHODS.items() if "." not in k}),
        json.dumps(CHECKED_RESULTS),
        json.dumps(OVERRIDES),
    )
    assert_guarded(tensorrt, found["missing"])
    assert all(kinds == ["bool"] for kinds in found["returns"].values()), found["returns"]
    for name in CHECKED_RESULTS:  # every call of it sits in an `if not ...:`
        calls = re.findall(rf"^.*\.{name}\(.*$", source, flags=re.MULTILINE)
        assert calls and all(re.match(r"\s*if not ", line) for line in calls), calls
    assert found["host_memory_len"] is False and ".nbytes" in source


def test_our_overrides_take_what_tensorrt_passes(tensorrt):
    import json

    found = tensorrt.run(SURFACE, "{}", "[]", json.dumps(OVERRIDES))
    ours = {}
    for module in (ast.parse((REPO / path).read_text()) for path in TENSORRT_MODULES):
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef) and node.bases:
                base = node.bases[0]
                if isinstance(base, ast.Attribute) and base.attr in OVERRIDES:
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name in OVERRIDES[base.attr]:
                            ours[f"{base.attr}.{item.name}"] = [a.arg for a in item.args.args][1:]
    assert set(found["parameters"]) <= set(ours)  # an interface absent here is not used here
    assert {name: ours[name] for name in found["parameters"]} == found["parameters"]


READER = """
import ctypes, mmap, os, tempfile
from daemon.runtime.trt_memory import MappedChunks, mapped_reader_class

if mapped_reader_class(trt) is None:
    print(json.dumps({"reader": None}))
    raise SystemExit
positions = trt.SeekPosition
origins = {positions.SET: "set", positions.CUR: "cur", positions.END: "end"}


def host_copy(dst, src, size, stream):  # Cuda.copy without a GPU: host memory only
    ctypes.memmove(dst, src, size)


data = bytes(range(256)) * 64
with tempfile.NamedTemporaryFile(delete=False) as handle:
    handle.write(data)
with open(handle.name, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as m:
    chunks = MappedChunks(m, host_copy, 0, origins)
    destination = ctypes.create_string_buffer(100)
    first = chunks.read_into(ctypes.addressof(destination), 100, 0)
    first_bytes = destination.raw == data[:100]
    to_end = chunks.seek(-10, positions.END)
    last = chunks.read_into(ctypes.addressof(destination), 100, 0)
    last_bytes = destination.raw[:10] == data[-10:]
    before_start = chunks.seek(-1, positions.SET)
    chunks.release()
os.unlink(handle.name)
print(json.dumps({"reader": "MappedEngineReader", "first": first, "first_bytes": first_bytes,
                  "to_end": to_end, "last": last, "last_bytes": last_bytes,
                  "before_start": before_start}))
"""


def test_engines_stream_from_the_map_where_tensorrt_can(tensorrt):
    found = tensorrt.run(READER)
    if tensorrt.version == "10.3.0":  # no IStreamReaderV2: the mapped bytes are copied whole
        assert found == {"reader": None}
        return
    assert found == {
        "reader": "MappedEngineReader",
        "first": 100,
        "first_bytes": True,
        "to_end": True,
        "last": 10,
        "last_bytes": True,
        "before_start": False,
    }
