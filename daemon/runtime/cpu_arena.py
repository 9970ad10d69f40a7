"""The process's one CPU arena for ONNX Runtime, and its memory given back when the box is idle.

Every CPU session of the process allocates its activations from one arena (ONNX Runtime's
environment allocator), so idle sessions hold none. The arena keeps what it once held: a
decoder window costs about 0.45 MB per frame, and after two requests side by side the service
would hold half a gigabyte while it says nothing. Once no request has run for `IDLE_RELEASE_S`,
a one-op session runs with ONNX Runtime's arena shrinkage, which frees the arena's free
regions, and glibc is asked to hand what it then holds free back to the system (`malloc_trim`:
once large blocks have been freed, glibc serves blocks of up to 32 MB from its heap and keeps
them when they are freed; measured: after the Kokoro GPU build's graphs were loaded and freed
in one process, a Piper request's arena gave 0 MB back without the trim). A burst of requests
keeps its memory (the delay restarts with each); the request after an idle spell pays for its
pages again (about 30 ms for a 512-frame window here).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import threading
from typing import Any

IDLE_RELEASE_S = 5.0
SHRINK = ("memory.enable_memory_arena_shrinkage", "cpu:0")

_lock = threading.Lock()
_registered = False
_exiting = threading.Event()  # no release once the interpreter is finishing (ORT may be gone)
atexit.register(_exiting.set)


def register_shared_arena() -> None:
    """One CPU arena for every session of the process (once per process); sessions use it with
    the session option `session.use_env_allocators`."""
    global _registered
    import onnxruntime as ort

    with _lock:
        if _registered:
            return
        memory = ort.OrtMemoryInfo(
            "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
        )
        # 0 / -1: no cap, ONNX Runtime's default growth (next power of two) and chunk sizes.
        ort.create_and_register_allocator(memory, ort.OrtArenaCfg(0, 0, -1, -1))
        _registered = True


class IdleRelease:
    """Gives the shared arena's free memory back once the requests it counts have stopped for
    `delay_s`. `busy` and `idle` are called as requests start and the last one ends."""

    def __init__(self, delay_s: float = IDLE_RELEASE_S) -> None:
        self.delay_s = delay_s
        self.releases = 0  # how many times memory was given back (watched by the tests)
        self._timer: threading.Timer | None = None
        self._session: Any = None
        self._lock = threading.Lock()
        self.released = threading.Condition(self._lock)

    def busy(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def idle(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.delay_s, self.release)
            self._timer.daemon = True
            self._timer.start()

    def release(self) -> None:
        """Shrinks the arena now (what the timer does)."""
        import numpy as np
        import onnxruntime as ort

        if _exiting.is_set():
            return
        session = self._shrinker()
        options = ort.RunOptions()
        options.add_run_config_entry(*SHRINK)
        session.run(None, {"x": np.zeros(1, np.float32)}, options)
        _trim_heap()
        with self._lock:
            self.releases += 1
            self.released.notify_all()

    def _shrinker(self):
        """Made once: its runs' end shrinks the arena every session shares."""
        with self._lock:
            if self._session is None:
                self._session = _make_shrinker()
            return self._session


@functools.cache
def _glibc() -> Any:
    """glibc, or None where the C library is another (musl has no malloc_trim)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _trim_heap() -> None:
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def _make_shrinker():
    """A session of one Identity op on the shared arena: a run that costs nothing."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    register_shared_arena()
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "arena-release",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what every supported ONNX Runtime reads
    options = ort.SessionOptions()
    options.add_session_config_entry("session.use_env_allocators", "1")
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
