"""systemd notifications over $NOTIFY_SOCKET (READY, STATUS, WATCHDOG), with the stdlib only."""

from __future__ import annotations

import os
import socket


def _address() -> str | None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return None
    return "\0" + address[1:] if address.startswith("@") else address


def notify(message: str) -> bool:
    """Sends one datagram; False when not run by systemd, or the socket is gone or full.

    Never blocks: the main thread sends the watchdog pings and must not hang on a slow reader.
    """
    address = _address()
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            sock.sendto(message.encode("utf-8"), address)
    except OSError:
        return False
    return True


def watchdog_interval_s() -> float | None:
    """Half the watchdog timeout systemd set for this process, or None without a watchdog."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000
