"""Logging to journald when systemd runs us (with priorities), to plain stderr otherwise."""

from __future__ import annotations

import logging
import os
import sys

# sd-daemon(3): a "<N>" prefix on a stderr line gives journald its syslog priority.
_PRIORITIES = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


class _JournalPrefixFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = _PRIORITIES.get(record.levelno, 6)
        return "\n".join(f"<{priority}>{line}" for line in super().format(record).splitlines())


def stderr_is_journal() -> bool:
    """systemd sets JOURNAL_STREAM to the device:inode of the stream it connected."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        info = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return expected == f"{info.st_dev}:{info.st_ino}"


def setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    handler: logging.Handler
    if stderr_is_journal():
        try:
            from systemd.journal import JournalHandler
        except ImportError:
            handler = logging.StreamHandler()
            handler.setFormatter(_JournalPrefixFormatter("%(name)s: %(message)s"))
        else:
            handler = JournalHandler(SYSLOG_IDENTIFIER="fastvoice")
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
