"""One mapping of an artifact's weights file for every session of its graph.

Left to itself, ONNX Runtime maps each external weight of each session on its own: the parallel
workers' three sessions of the VITS encoder made about 460 mappings of one 53 MB file, counted
three times in the service's RSS. `fastvoice build` records where each weight lies in the file
(the manifest's `initializers`); here the file is mapped once and every session is given the
same weights as OrtValues over that mapping, used in place, never copied.

A session packs the weights its kernels want in another layout (convolutions, matrix products)
into buffers of its own and never reads those from the mapping again; after each session is
made the mapping's pages are let go (the kernel reads back, from the page cache, the ones a run
still uses). Kokoro's int8 graph: 49 MB less resident after its load.
"""

from __future__ import annotations

import math
import mmap
from pathlib import Path
from typing import Any

import numpy as np

from daemon.errors import BackendError

# A manifest's `initializers` entry: name, numpy dtype, shape, offset and length in the file.
Entry = tuple[str, str, list[int], int, int]


class SharedWeights:
    """The weights of one artifact, mapped once; `add_to` hands them to a session's options."""

    def __init__(self, weights_file: Path, table: list[Entry]) -> None:
        """Raises BackendError when the table does not describe the file (the session would
        read weights from the wrong places)."""
        import onnxruntime as ort

        self.path = weights_file
        self._mapping = np.memmap(weights_file, dtype=np.uint8, mode="r")
        self._values: list[tuple[str, Any]] = []
        for name, dtype, shape, offset, length in table:
            item = np.dtype(dtype)
            if length != math.prod(shape) * item.itemsize or offset + length > self._mapping.size:
                raise BackendError(
                    f"{weights_file}: the manifest places weight {name!r} outside the file or "
                    "with a size its shape does not have; rebuild with `fastvoice build`"
                )
            array = self._mapping[offset : offset + length].view(item).reshape(shape)
            self._values.append((name, ort.OrtValue.ortvalue_from_numpy(array)))

    def __len__(self) -> int:
        return len(self._values)

    def add_to(self, options: Any) -> None:
        """The session made with `options` uses these weights where they are mapped."""
        for name, value in self._values:
            options.add_initializer(name, value)

    def release_pages(self) -> None:
        """Lets the mapping's resident pages go (clean file pages: nothing is lost)."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self._mapping._mmap.madvise(mmap.MADV_DONTNEED)
