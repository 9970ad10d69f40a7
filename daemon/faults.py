"""Fault injection for the fault tests, armed only by the FASTVOICE_FAULTS environment variable,
never by the config or a payload.

`FASTVOICE_FAULTS=hang-synthesis=MARKER` makes the synthesis of any sentence that holds MARKER
block forever, as a wedged runtime or driver would: the watchdog must notice.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

ENV = "FASTVOICE_FAULTS"


@functools.cache
def armed() -> dict[str, str]:
    faults = {}
    for item in os.environ.get(ENV, "").split(","):
        name, _, value = item.partition("=")
        if name.strip():
            faults[name.strip()] = value
    if faults:
        log.warning("fault injection armed: %s", ", ".join(sorted(faults)))
    return faults


def sentence_hook() -> Callable[[str], None] | None:
    """What the synthesizer calls with each sentence's words where a fault is armed; None (no
    call at all) on a box in service."""
    marker = armed().get("hang-synthesis")
    if not marker:
        return None

    def hang_if_marked(sentence: str) -> None:
        if marker in sentence:
            log.warning("fault injection: synthesis hangs on %r", sentence[:60])
            threading.Event().wait()

    return hang_if_marked
