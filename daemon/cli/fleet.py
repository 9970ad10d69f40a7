"""`fastvoice send`: a say command to a running service over the broker (one box, a zone
starting together, or the fleet's shared render queue), its events followed."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from daemon.cli.options import bounded_float, print_event, read_text, speaker
from daemon.errors import TextError, exit_code


def cmd_send(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from daemon.admin.config_checks import load_on_box
    from daemon.mqtt.send import send
    from daemon.service.commands import SayCommand
    from daemon.validation import format_validation_error

    config = load_on_box(args.config)
    say = {"text": read_text(args.text), "priority": args.priority}
    optional = {
        "id": args.id,
        "voice": args.voice,
        "speaker": args.speaker,
        "volume": args.volume,
        "chime": args.chime,
        "expires_s": args.expires,
    }
    say.update({key: value for key, value in optional.items() if value is not None})
    try:
        SayCommand.model_validate(say)
    except ValidationError as error:
        raise TextError(format_validation_error(error, noun="field")) from None
    if args.render:
        return _send_to_render(config, say, args)
    if args.zone is not None:
        if args.output is not None:
            raise TextError("-o takes one box's audio: not with --zone")
        lead = config.queue.sync_lead_s if args.lead is None else args.lead
        if _send_to_zone(config, args.zone, say, lead, args.timeout):
            return 0
        if args.fallback_zone is None:
            return 1
        print(f"fallback: zone {args.fallback_zone}")
        again = {**say, "id": f"{say['id']}-fallback"}
        return 0 if _send_to_zone(config, args.fallback_zone, again, lead, args.timeout) else 1
    events, audio = send(config.mqtt, say, args.timeout, args.output)
    for event in events:
        print_event(event)
    if args.output is not None and audio is not None:
        _save(args.output, audio)
    last = events[-1]  # refused or failed: the exit code of its reason, as `say` exits
    return 0 if last["event"] == "finished" else exit_code(str(last.get("reason")))


def _send_to_zone(config, zone: str, say: dict, lead: float, timeout: float) -> bool:
    """Sends to a zone and prints each box's events, its receipt and the zone's summary; True
    when every box played it."""
    from daemon.mqtt.send import send_to_zone

    receipts = send_to_zone(config.mqtt, zone, say, lead, timeout)
    for receipt in receipts:
        for event in receipt.events:
            print(f"{receipt.box}  ", end="")
            print_event(event)
    for receipt in receipts:
        said = receipt.outcome
        if receipt.finished_at is not None:
            said += " at " + time.strftime("%H:%M:%S", time.localtime(receipt.finished_at))
        print(
            f"receipt {receipt.box}  {said}" + (f": {receipt.message}" if receipt.message else "")
        )
    played = sum(receipt.played for receipt in receipts)
    print(f"zone {zone}: {played} of {len(receipts)} played")
    return played == len(receipts)


def _save(path: Path, audio: bytes) -> None:
    from daemon.box.files import save_audio

    save_audio(path, audio)
    print(f"saved {path}")


def _send_to_render(config, say: dict, args: argparse.Namespace) -> int:
    from daemon.mqtt.send import send_to_render

    if args.zone is not None:
        raise TextError("--render sends to the fleet's render queue: not with --zone")
    claims, audio = send_to_render(config.mqtt, say, args.timeout)
    for claim in claims:
        if claim.get("done"):
            print(f"{claim['outcome']} by {claim['box']}")
        else:
            print(f"taken by {claim['box']}" + (" (queued again)" if claim.get("requeued") else ""))
    if audio is None:
        print("no audio: the box's events say why", file=sys.stderr)
        return 1
    if args.output is not None:
        _save(args.output, audio)
    return 0


def add_commands(commands, common: argparse.ArgumentParser) -> None:
    """`send`."""
    send = commands.add_parser(
        "send", parents=[common], help="send a say command to a running service, follow it"
    )
    send.add_argument("text", help="text to speak, or - to read standard input")
    send.add_argument("--priority", default="normal", choices=["low", "normal", "high", "critical"])
    send.add_argument("--voice", help="voice name")
    send.add_argument("--speaker", type=speaker, help="speaker name or index")
    send.add_argument("--volume", type=bounded_float(0, 1), help="this job's volume, 0 to 1")
    send.add_argument("--expires", type=bounded_float(0, 86_400, low_inclusive=False))
    send.add_argument("--chime", help="sound before the speech (a name, or none)")
    send.add_argument("--zone", help="every box of this zone, starting together (one `at` for all)")
    send.add_argument(
        "--fallback-zone",
        help="with --zone: where to send it again when a box of the zone did not play it",
    )
    send.add_argument(
        "--lead",
        type=bounded_float(0.1, 60),
        help="with --zone: seconds from now to the shared start (default: queue.sync_lead_s)",
    )
    send.add_argument(
        "--render",
        action="store_true",
        help="to the fleet's shared render queue (any box of a render group), audio back",
    )
    send.add_argument("--id", help="job id (default: generated)")
    send.add_argument("--timeout", type=bounded_float(0, 3600, low_inclusive=False), default=120)
    send.add_argument(
        "-o",
        "--output",
        "--save",
        dest="output",
        type=Path,
        help="have the audio published back and write it to this WAV file (as `say -o`)",
    )
    send.set_defaults(handler=cmd_send)
