"""A job's audio handed to a consumer on an asyncio loop (an HTTP body, a Wyoming connection):
the audio is made on a worker thread, which waits while the consumer is `depth` blocks behind,
and stops at its next block when the consumer leaves (a client that went away)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Iterable
from concurrent.futures import Executor

import numpy as np

from daemon.audio.sinks.base import deliver

_END = None  # after the last block


class LoopSink:
    """The sink whose blocks a consumer on an asyncio loop reads (`next`), at most `depth`
    ahead of it."""

    lead_s = 0.0
    opening_s = 0.0

    def __init__(self, loop: asyncio.AbstractEventLoop, depth: int = 4) -> None:
        """Made on `loop`'s thread; written from another."""
        self._loop = loop
        self._queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue(depth)
        self._left = threading.Event()

    def open(self, rate: int, start_at: float | None) -> None:
        pass

    def write(self, block: np.ndarray) -> bool:
        self._hand(block)
        return not self._left.is_set()

    def close(self, complete: bool) -> bool:
        self._hand(_END)
        return complete and not self._left.is_set()

    def _hand(self, item: np.ndarray | None) -> None:
        """Puts `item` in the consumer's queue, waiting for room (a consumer that leaves makes
        room: `leave` empties the queue; a loop that stopped counts as left)."""
        if self._left.is_set():
            return
        try:
            handed = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        except RuntimeError:  # the loop is closed
            self._left.set()
            return
        while True:
            try:
                handed.result(timeout=1.0)
                return
            except concurrent.futures.TimeoutError:  # not the builtin one before Python 3.11
                if self._left.is_set() or not self._loop.is_running():
                    handed.cancel()
                    self._left.set()
                    return

    async def next(self) -> np.ndarray | None:
        """The next block; None after the last."""
        return await self._queue.get()

    def leave(self) -> None:
        """The consumer goes (on the loop's thread): what is queued is dropped and the writer's
        next block is its last."""
        self._left.set()
        while not self._queue.empty():
            self._queue.get_nowait()

    def abandon(self) -> None:
        """The consumer was dropped without leaving (from any thread): the writer stops within
        a second."""
        self._left.set()


class Handoff:
    """A render's blocks delivered on `executor`'s thread to a `LoopSink` and read here, on the
    loop: `next` gives them in order, then None; a failure while they are made is raised by
    `next` once the blocks before it were read."""

    def __init__(self, blocks: Iterable[np.ndarray], rate: int, executor: Executor) -> None:
        loop = asyncio.get_running_loop()
        self.sink = LoopSink(loop)
        self._done = loop.run_in_executor(executor, deliver, blocks, [self.sink], rate)
        self._ahead: list[np.ndarray | None] = []  # a block read by `peek`
        # An answer dropped before its body was read (a client gone before the response
        # started) never calls `close`: the render still ends and gives back its place.
        weakref.finalize(self, self.sink.abandon)

    async def peek(self) -> np.ndarray | None:
        """The next block, left to be read (waiting for it: a render that fails before its
        first block raises here, before an answer starts)."""
        if not self._ahead:
            self._ahead.append(await self._read())
        return self._ahead[0]

    async def next(self) -> np.ndarray | None:
        if self._ahead:
            return self._ahead.pop()
        return await self._read()

    async def _read(self) -> np.ndarray | None:
        block = await self.sink.next()
        if block is None:
            await self._done  # raises what ended the making early
        return block

    async def close(self) -> None:
        """Ends the render (the consumer is done or gone) and waits for its thread to let go;
        its failure, if any, was the consumer's to see."""
        self.sink.leave()
        with contextlib.suppress(Exception):
            await asyncio.shield(self._done)
