"""What the commands share: option types, text from the command line or standard input, the
voices on this box's backend, one line per job event."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from daemon.errors import TextError

if TYPE_CHECKING:
    from daemon.config import Config
    from daemon.voices.registry import VoiceRegistry

log = logging.getLogger("fastvoice")


def bounded_float(low: float, high: float, low_inclusive: bool = True) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        too_low = value < low if low_inclusive else value <= low
        if too_low or value > high or value != value:
            bracket = "[" if low_inclusive else "("
            raise argparse.ArgumentTypeError(f"{text} is outside {bracket}{low}, {high}]")
        return value

    return parse


def device(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def speaker(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def read_text(argument: str) -> str:
    if argument != "-":
        return argument
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextError(
            f"standard input is not UTF-8 text (bad byte at offset {error.start})"
        ) from None


def setup(config: Config) -> tuple[VoiceRegistry, str]:
    """The voices on the backend chosen for this box, and why it was chosen."""
    from daemon.runtime.select import create_backend
    from daemon.voices.registry import VoiceRegistry

    backend, reason = create_backend(config)
    log.info("backend %s (%s)", backend.name, reason)
    return VoiceRegistry(config, backend), reason


def print_event(event: dict[str, Any]) -> None:
    details = {k: v for k, v in event.items() if k not in ("v", "event", "id", "time")}
    extra = " ".join(f"{key}={value}" for key, value in details.items())
    print(f"{event['event']:<12} {event['id']}  {extra}".rstrip(), flush=True)
