"""`fastvoice` command line. Exit codes: 0 ok, 2 usage or config error, 1 runtime failure.

One module per command group (speech: say, text; fleet: send; voices; box: serve, build,
doctor, system, ...), each adding its commands to the parser. Each command imports what it uses
when it runs: `fastvoice say` handing its job to a running service loads no model, no numpy and
no config models, and starts in tens of milliseconds.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from daemon import __version__
from daemon.box.logs import setup_logging
from daemon.cli import box, fleet, speech, voices
from daemon.cli.options import log
from daemon.errors import FastvoiceError


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        help="config file (default: $FASTVOICE_CONFIG, /etc/fastvoice/fastvoice.yaml)",
    )
    common.add_argument("-v", "--verbose", action="store_true", help="log what happens")

    parser = argparse.ArgumentParser(
        prog="fastvoice", description="Offline text-to-speech for edge boxes.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"fastvoice {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for group in (speech, fleet, voices, box):
        group.add_commands(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # pydantic looks for plugins of its own in every installed package's entry points when it
    # builds the first config model (about 35 ms of a cold `say`); fastvoice uses none. A user's
    # own setting of it stands.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "bench":
        args.bench_args = [*unknown, *args.bench_args]  # they are tools/bench.py's options
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    setup_logging(args.verbose)
    try:
        return args.handler(args)
    except FastvoiceError as error:
        print(f"fastvoice: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if args.verbose:
            log.exception("unexpected failure")
        print(f"fastvoice: internal error: {error!r} (run with -v for details)", file=sys.stderr)
        return 1


def run() -> NoReturn:
    """The console entry point: `main`, then an exit without the interpreter's teardown (ONNX
    Runtime's sessions and thread pools, every module's cleanup), which is about a tenth of a
    second of a cold `say`. Every command has closed its files by then; logs and the standard
    streams are flushed here."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left, a closed stream
            code = code or 1
    os._exit(code)
