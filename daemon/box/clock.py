"""How well this box's clock is kept, as the kernel knows it (adjtimex): chrony,
systemd-timesyncd and ntpd all discipline the kernel's clock and tell it their estimated error.
Boxes that start an announcement together (`at`) are only as together as their clocks."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

TIME_ERROR = 5  # the clock state ntp_adjtime returns while the clock is not synchronised
STA_UNSYNC = 0x0040
STA_NANO = 0x2000  # the offset is in nanoseconds, not microseconds


class _Timeval(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long))


class Timex(ctypes.Structure):
    """Linux's `struct timex` (sys/timex.h)."""

    _fields_ = (
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    )


def read_timex() -> tuple[int, Timex] | None:
    """The kernel's clock state and figures, read only (modes 0); None where there is no
    ntp_adjtime (not Linux)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        adjtime = ctypes.CDLL(name, use_errno=True).ntp_adjtime
    except (OSError, AttributeError):
        return None
    timex = Timex()
    state = adjtime(ctypes.byref(timex))
    return (state, timex) if state >= 0 else None


def clock_state() -> dict[str, Any] | None:
    """For `status/info`: whether the clock is synchronised, the offset still being slewed
    away, and the estimated and maximum error, in ms."""
    read = read_timex()
    if read is None:
        return None
    state, timex = read
    offset_unit = 1e-6 if timex.status & STA_NANO else 1e-3
    return {
        "synchronised": state != TIME_ERROR and not timex.status & STA_UNSYNC,
        "offset_ms": round(timex.offset * offset_unit, 3),
        "estimated_error_ms": round(timex.esterror / 1000, 3),
        "max_error_ms": round(timex.maxerror / 1000, 3),
        "source": "kernel (adjtimex)",
    }
