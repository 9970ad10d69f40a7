"""`fastvoice` command line. Exit codes: 0 ok, 2 usage or config error, 1 runtime failure.

Each command imports what it uses when it runs: `fastvoice say` handing its job to a running
service loads no model, no numpy and no config models, and starts in tens of milliseconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from daemon import __version__
from daemon.cli_voices import add_voice_commands
from daemon.errors import FastvoiceError, TextError
from daemon.logs import setup_logging

if TYPE_CHECKING:
    import numpy as np

    from daemon.config import Config
    from daemon.voices.registry import VoiceRegistry

log = logging.getLogger("fastvoice")
# `say` options the service's queue does not take: with any of them, `say` speaks on its own.
LOCAL_ONLY_OPTIONS = (
    "raw",
    "device",
    "length_scale",
    "noise_scale",
    "noise_w",
    "sentence_pause",
    "no_cache",
    "captions",
)


def _bounded_float(low: float, high: float, low_inclusive: bool = True) -> Callable[[str], float]:
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


def _device(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def _read_text(argument: str) -> str:
    if argument != "-":
        return argument
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextError(
            f"standard input is not UTF-8 text (bad byte at offset {error.start})"
        ) from None


def _speaker(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def _setup(config: Config) -> tuple[VoiceRegistry, str]:
    """The voices on the backend chosen for this box, and why it was chosen."""
    from daemon.runtime.select import create_backend
    from daemon.voices.registry import VoiceRegistry

    backend, reason = create_backend(config)
    log.info("backend %s (%s)", backend.name, reason)
    return VoiceRegistry(config, backend), reason


def cmd_say(args: argparse.Namespace) -> int:
    text = _read_text(args.text)
    local_only = [name for name in LOCAL_ONLY_OPTIONS if getattr(args, name)]
    if not args.local and not local_only:
        from daemon.local_socket import ServiceUnavailable

        try:
            return _say_through_service(args, text)
        except ServiceUnavailable as error:
            if str(error):  # a service is there but did not take the job; none there: silence
                print(f"fastvoice: note: {error}; speaking here", file=sys.stderr)
    return _say_here(args, text)


def _say_through_service(args: argparse.Namespace, text: str) -> int:
    """The job goes to the running service's queue; its events are printed as they come."""
    from daemon.local_socket import hand_to_service

    say: dict[str, Any] = {"text": text, "priority": args.priority}
    optional = {"voice": args.voice, "speaker": args.speaker, "id": args.id, "chime": args.chime}
    say.update({key: value for key, value in optional.items() if value is not None})
    if args.volume != 1.0:
        say["volume"] = args.volume
    try:
        result = hand_to_service(say, args.output is not None, _print_event, args.timeout)
    except ConnectionError as error:
        raise FastvoiceError(f"the service lost the job's trail: {error}") from None
    last = result.last
    if last["event"] == "rejected":
        raise TextError(last.get("message", "the service rejected the job"))
    if last["event"] != "finished":
        raise FastvoiceError(f"the job {last['event']}: {last.get('message', last.get('reason'))}")
    if args.output is not None:
        if result.audio is None:
            raise FastvoiceError("the service finished the job but sent no audio")
        from daemon.files import save_audio

        save_audio(args.output, result.audio)
    return 0


def _print_event(event: dict[str, Any]) -> None:
    details = {k: v for k, v in event.items() if k not in ("v", "event", "id", "time")}
    extra = " ".join(f"{key}={value}" for key, value in details.items())
    print(f"{event['event']:<12} {event['id']}  {extra}".rstrip(), flush=True)


def _say_here(args: argparse.Namespace, text: str) -> int:
    """Loads the voice in this process and speaks (or writes) the text."""
    import itertools

    from daemon.cache import phrase_cache
    from daemon.config import load_config
    from daemon.settings import Settings
    from daemon.synthesizer import Synthesizer
    from daemon.voices.base import SpeechOptions

    config = load_config(args.config)
    registry, _ = _setup(config)
    voice = registry.get(args.voice)
    rate = voice.info.sample_rate
    player = None
    if args.output is None and not args.raw:
        from daemon.audio.player import Player

        player = Player.from_config(config.audio, device=args.device)
        target = player.target(rate)
        log.info("playing on %s at %d Hz", target.name, target.sample_rate)
    options = SpeechOptions(
        speaker=args.speaker,
        length_scale=args.length_scale,
        noise_scale=args.noise_scale,
        noise_w=args.noise_w,
        volume=args.volume,
    )
    cache = None if args.no_cache else phrase_cache(config.cache)
    chime = config.sounds.chime_for(args.chime, args.priority)
    if args.captions is not None:
        from daemon.captions import form_of

        form_of(args.captions)  # a name that gives no format is refused before any audio
        if not voice.times_words:
            raise FastvoiceError(
                f"voice {voice.info.name!r} gives no word timings for --captions: they come "
                "from its encoder artifact (run `fastvoice build`)"
            )
    synthesizer = Synthesizer(registry, Settings(config), cache)
    chunks = synthesizer.synthesize(text, voice.info.name, options, chime=chime)
    first = next(chunks)
    clock = synthesizer.word_clock(rate, args.sentence_pause)
    pieces = clock.follow(itertools.chain([first], chunks))
    blocks = synthesizer.joined(pieces, rate, args.sentence_pause)
    if args.raw:
        _write_raw(blocks)
    elif player is None:
        from daemon.audio.wav import write_wav

        try:
            frames = write_wav(args.output, blocks, rate)
        except OSError as error:
            raise FastvoiceError(f"cannot write {args.output}: {error.strerror or error}") from None
        log.info("wrote %s: %.2f s at %d Hz", args.output, frames / rate, rate)
    else:
        try:
            player.play(blocks, rate)
        except KeyboardInterrupt:
            player.stop()
            raise
    if args.captions is not None:
        from daemon import captions

        captions.save(args.captions, captions.cues(_written(text), clock.words))
        log.info("wrote %s: %d cues", args.captions, len(clock.words))
    return 0


def _written(text: str) -> str | None:
    """The text captions show, where it is plain text (SSML: the words as said)."""
    from daemon.text.ssml import is_ssml

    return None if is_ssml(text) else text


def _write_raw(blocks: Iterable[np.ndarray]) -> int:
    """16-bit mono PCM to stdout as each sentence is ready, for pipes into other players."""
    from daemon.audio.pcm import to_int16

    out = sys.stdout.buffer
    try:
        for block in blocks:
            out.write(to_int16(block).tobytes())
            out.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_text(args: argparse.Namespace) -> int:
    """One line per utterance, as the voice will say it; pauses on lines of their own."""
    from daemon.config import load_config
    from daemon.settings import Settings
    from daemon.synthesizer import Synthesizer
    from daemon.text.script import Utterance, describe

    config = load_config(args.config)
    registry, _ = _setup(config)
    synthesizer = Synthesizer(registry, Settings(config))
    voice = registry.require(args.voice)
    text = _read_text(args.text)
    for item in synthesizer.script(text, voice, ssml=args.ssml):
        print(describe(item, voice))
        if args.phonemes and isinstance(item, Utterance):
            spoken = registry.get(item.voice)
            phonemize = getattr(spoken, "phonemes", None)
            if phonemize is None:
                print(f"    (voice {item.voice} does not speak through phonemes)")
                continue
            for sentence in phonemize(item.parts):
                print("    " + "".join(sentence))
    if args.timings:
        _print_timings(synthesizer, text, voice, args.ssml)
    return 0


def _print_timings(synthesizer, text: str, voice: str, ssml: bool) -> None:
    """When each word is heard (seconds from the start of the audio), as captions show it."""
    from daemon import captions

    clock = synthesizer.word_clock(synthesizer.voices.get(voice).info.sample_rate)
    for _ in clock.follow(synthesizer.synthesize(text, voice, ssml=ssml)):
        pass
    if not clock.words:
        print("(the voice gives no word timings)")
    for cue in captions.cues(None if ssml else _written(text), clock.words):
        print(f"{cue.start_s:7.2f} {cue.end_s:7.2f}  {cue.text}")


def cmd_voices(args: argparse.Namespace) -> int:
    from daemon.config import load_config

    config = load_config(args.config)
    registry, reason = _setup(config)
    infos = [registry.get(name).info for name in registry.names]
    gpu = registry.backend.gpu_report()
    if args.json:
        report = {
            "backend": registry.backend.name,
            "backend_reason": reason,
            "gpu": gpu,
            "voices": [info.as_dict() for info in infos],
        }
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'name':<24} {'family':<7} {'language':<9} {'rate':>6} {'speakers':>8}  backend")
    for info in infos:
        stages = []
        for stage in info.stages:
            threads = f"; {stage.threads} threads" if stage.threads else ""
            providers = ", ".join(stage.providers)
            described = f"{stage.backend} ({providers}{threads}; {stage.precision})"
            if described not in stages:
                stages.append(described)
        backend = " + ".join(stages)
        marker = "*" if info.name == config.voice else " "
        print(
            f"{info.name + marker:<24} {info.family:<7} {info.language:<9} {info.sample_rate:>6} "
            f"{max(1, len(info.speakers)):>8}  {backend}"
        )
    print("* default voice")
    print(f"backend: {reason}")
    for decision in (gpu or {}).get("budget", {}).get("decisions", []):
        print(f"  {decision['stage']} -> {decision['backend']}: {decision['reason']}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from daemon.config import config_path_in_use, load_config
    from daemon.doctor import FAIL, run_checks
    from daemon.errors import ConfigError

    path = config_path_in_use(args.config)
    try:
        config, problem = load_config(args.config), f"{path or 'built-in defaults'}: valid"
    except ConfigError as error:
        config, problem = None, str(error)
    findings = run_checks(config, problem)
    if args.json:
        print(json.dumps([finding.as_dict() for finding in findings], indent=2))
    else:
        for finding in findings:
            print(f"{finding.status:<4}  {finding.check}: {finding.detail}")
            if finding.fix:
                print(f"      fix: {finding.fix}")
    return 1 if any(finding.status == FAIL for finding in findings) else 0


def cmd_system_install(args: argparse.Namespace) -> int:
    from daemon.system_install import install

    install(args.root, args.box, build=not args.no_build, start=not args.no_start)
    return 0


def cmd_system_uninstall(args: argparse.Namespace) -> int:
    from daemon.system_install import uninstall

    uninstall(args.root, args.purge)
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    from daemon.audio.player import output_devices

    devices = output_devices()
    if not devices:
        print("no audio output devices; use -o out.wav to write a file")
        return 1
    for device in devices:
        print(f"{device['index']:>3}  {device['name']}  ({int(device['default_samplerate'])} Hz)")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    from daemon.config import config_path_in_use, read_config_file

    path = args.path or config_path_in_use(args.config)
    if path is None:
        print("no config file given or found; the built-in defaults are valid")
        return 0
    config = read_config_file(path)
    print(f"{path}: ok ({len(config.voices)} voice(s), default {config.voice!r})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from daemon.serve import serve

    return serve(args.config, wyoming=args.wyoming, unregister=args.unregister, http=args.http)


def cmd_send(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from daemon.commands import SayCommand
    from daemon.config import load_config
    from daemon.send import send
    from daemon.validation import format_validation_error

    config = load_config(args.config)
    say = {"text": _read_text(args.text), "priority": args.priority}
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
        from daemon.send import send_to_zone

        if args.output is not None:
            raise TextError("-o takes one box's audio: not with --zone")
        lead = config.queue.sync_lead_s if args.lead is None else args.lead
        by_box = send_to_zone(config.mqtt, args.zone, say, lead, args.timeout)
        for box, box_events in by_box.items():
            for event in box_events:
                print(f"{box}  ", end="")
                _print_event(event)
        ok = all(box_events[-1]["event"] == "finished" for box_events in by_box.values())
        return 0 if ok else 1
    events, audio = send(config.mqtt, say, args.timeout, args.output)
    for event in events:
        _print_event(event)
    if args.output is not None and audio is not None:
        _save(args.output, audio)
    return 0 if events[-1]["event"] == "finished" else 1


def _save(path: Path, audio: bytes) -> None:
    from daemon.files import save_audio

    save_audio(path, audio)
    print(f"saved {path}")


def _send_to_render(config, say: dict, args: argparse.Namespace) -> int:
    from daemon.send import send_to_render

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


def cmd_build(args: argparse.Namespace) -> int:
    from daemon.config import load_config
    from daemon.runtime.artifacts import default_store
    from edge_build.build import build_voices

    config = load_config(args.config)
    store = config.runtime.artifact_dir or default_store()

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    results = build_voices(config, store, force=args.force, verify=args.verify, progress=progress)
    for result in results:
        print(f"{result.stage}: {result.status} ({result.seconds:.2f} s) {result.directory}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Needs the export environment (PyTorch and the CosyVoice classes): tools/setup-export.sh."""
    try:
        from edge_build.cosyvoice2_pack import export_model_dir
    except ImportError as error:
        raise FastvoiceError(
            f"`fastvoice export` needs PyTorch and the CosyVoice classes ({error}): run it from "
            "the export environment (tools/setup-export.sh makes .venv-export)"
        ) from None
    if not args.model_dir.is_dir():
        raise FastvoiceError(f"{args.model_dir} is not a directory")
    pack = export_model_dir(args.model_dir, args.out_dir, language=args.language)
    print(f"wrote the voice pack {pack}; use it with a voice of family cosyvoice2, pack: {pack}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """The side-by-side benchmark lives with the operator's tools in the source checkout."""
    import runpy

    script = Path(__file__).resolve().parent.parent / "tools" / "bench.py"
    if not script.is_file():
        raise FastvoiceError(f"{script} not found: `fastvoice bench` runs from a source checkout")
    sys.argv = [str(script), *args.bench_args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


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

    say = commands.add_parser("say", parents=[common], help="speak a text (or write it to a WAV)")
    say.add_argument("text", help="text to speak, or - to read standard input")
    say.add_argument("--voice", help="voice name (see `fastvoice voices`)")
    say.add_argument(
        "--speaker", type=_speaker, help="speaker name or index (multi-speaker voices)"
    )
    output = say.add_mutually_exclusive_group()
    output.add_argument("-o", "--output", type=Path, help="write a WAV file instead of playing")
    output.add_argument(
        "--raw", action="store_true", help="stream 16-bit mono PCM to stdout instead of playing"
    )
    say.add_argument("--device", type=_device, help="output device name or index")
    say.add_argument(
        "--captions",
        type=Path,
        metavar="FILE",
        help="write the words' timings too: FILE.vtt (WebVTT), FILE.srt or FILE.json",
    )
    say.add_argument(
        "--length-scale", type=_bounded_float(0, 5, low_inclusive=False), help="> 1 is slower"
    )
    say.add_argument("--noise-scale", type=_bounded_float(0, 2), help="generator noise")
    say.add_argument("--noise-w", type=_bounded_float(0, 2), help="phoneme width noise")
    say.add_argument("--volume", type=_bounded_float(0, 1), default=1.0, help="0 to 1 (default 1)")
    say.add_argument(
        "--sentence-pause", type=_bounded_float(0, 5), help="seconds between sentences"
    )
    say.add_argument(
        "--no-cache", action="store_true", help="neither use nor fill the phrase cache"
    )
    say.add_argument(
        "--priority",
        default="normal",
        choices=["low", "normal", "high", "critical"],
        help="queue order when a service runs on this box (default normal)",
    )
    say.add_argument("--id", help="job id when a service runs on this box (default: generated)")
    say.add_argument(
        "--chime",
        help="sound before the speech: dingdong, attention, alarm, a file's name in sounds.dir, "
        "or none (default: the config's sounds.chime_by_priority)",
    )
    say.add_argument(
        "--timeout",
        type=_bounded_float(0, 86_400, low_inclusive=False),
        default=600,
        help="seconds to follow a job the service has queued (default 600)",
    )
    say.add_argument(
        "--local",
        action="store_true",
        help="speak in this process even when a service runs on this box (which otherwise "
        "queues the job; --raw, --device, --no-cache and the scale and pause options imply it)",
    )
    say.set_defaults(handler=cmd_say)

    text = commands.add_parser(
        "text",
        parents=[common],
        help="print what a voice will say: the words after normalisation, SSML and the lexicon",
    )
    text.add_argument("text", help="text or SSML, or - to read standard input")
    text.add_argument("--voice", help="voice name (see `fastvoice voices`)")
    text.add_argument("--phonemes", action="store_true", help="print the phonemes too")
    text.add_argument(
        "--timings",
        action="store_true",
        help="synthesize, and print when each word is heard (as captions show it)",
    )
    text.add_argument(
        "--ssml", action="store_true", help="read the text as SSML even without <speak>"
    )
    text.set_defaults(handler=cmd_text)

    serve = commands.add_parser(
        "serve", parents=[common], help="run the service: MQTT commands, queue, playback"
    )
    serve.add_argument(
        "--wyoming", metavar="URI", help="also serve Wyoming here, e.g. tcp://0.0.0.0:10200"
    )
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve HTTP (REST, OpenAI speech, /metrics) here, e.g. 127.0.0.1:8080",
    )
    serve.add_argument(
        "--unregister",
        action="store_true",
        help="remove this box's Home Assistant entities (empty retained configs) and exit",
    )
    serve.set_defaults(handler=cmd_serve)

    send = commands.add_parser(
        "send", parents=[common], help="send a say command to a running service, follow it"
    )
    send.add_argument("text", help="text to speak, or - to read standard input")
    send.add_argument("--priority", default="normal", choices=["low", "normal", "high", "critical"])
    send.add_argument("--voice", help="voice name")
    send.add_argument("--speaker", type=_speaker, help="speaker name or index")
    send.add_argument("--volume", type=_bounded_float(0, 1), help="this job's volume, 0 to 1")
    send.add_argument("--expires", type=_bounded_float(0, 86_400, low_inclusive=False))
    send.add_argument("--chime", help="sound before the speech (a name, or none)")
    send.add_argument("--zone", help="every box of this zone, starting together (one `at` for all)")
    send.add_argument(
        "--lead",
        type=_bounded_float(0.1, 60),
        help="with --zone: seconds from now to the shared start (default: queue.sync_lead_s)",
    )
    send.add_argument(
        "--render",
        action="store_true",
        help="to the fleet's shared render queue (any box of a render group), audio back",
    )
    send.add_argument("--id", help="job id (default: generated)")
    send.add_argument("--timeout", type=_bounded_float(0, 3600, low_inclusive=False), default=120)
    send.add_argument(
        "-o",
        "--output",
        "--save",
        dest="output",
        type=Path,
        help="have the audio published back and write it to this WAV file (as `say -o`)",
    )
    send.set_defaults(handler=cmd_send)

    build = commands.add_parser(
        "build", parents=[common], help="optimise every voice for this box (once per install)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.add_argument("--verify", action="store_true", help="check every file's sha256 too")
    build.set_defaults(handler=cmd_build)

    export = commands.add_parser(
        "export", parents=[common], help="make a voice pack from a model (export environment)"
    )
    families = export.add_subparsers(dest="family", required=True, metavar="FAMILY")
    cosyvoice2 = families.add_parser(
        "cosyvoice2", parents=[common], help="a CosyVoice 2 model directory → a voice pack"
    )
    cosyvoice2.add_argument("model_dir", type=Path, help="e.g. CosyVoice2-0.5B (with spk2info.pt)")
    cosyvoice2.add_argument("out_dir", type=Path, help="the voice pack directory to write")
    cosyvoice2.add_argument("--language", default="mul", help="language code the pack reports")
    cosyvoice2.set_defaults(handler=cmd_export)

    bench = commands.add_parser(
        "bench",
        parents=[common],
        help="fastvoice against stock piper-tts, side by side (tools/bench.py; see its --help)",
        add_help=False,
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, help="options for tools/bench.py")
    bench.set_defaults(handler=cmd_bench)

    voices = commands.add_parser(
        "voices",
        parents=[common],
        help="this box's voices and their backend; list, install, remove, show catalogue voices",
    )
    voices.add_argument("--json", action="store_true", help="machine-readable output")
    voices.set_defaults(handler=cmd_voices)
    add_voice_commands(voices, common)

    doctor = commands.add_parser(
        "doctor",
        parents=[common],
        help="check this box (audio, broker, voices, disk, GPU, clock, config) and say the fixes",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(handler=cmd_doctor)

    system = commands.add_parser("system", parents=[common], help="install as a systemd service")
    system_commands = system.add_subparsers(dest="system_command", required=True, metavar="ACTION")
    system_install = system_commands.add_parser(
        "install",
        parents=[common],
        help="user, directories, config, unit, artifacts, enable --now (run as root; idempotent)",
    )
    system_install.add_argument(
        "--root", type=Path, default=Path("/"), help="install into this directory tree instead"
    )
    system_install.add_argument(
        "--box", choices=("cpu", "jetson", "rtx"), help="the config template (default: detected)"
    )
    system_install.add_argument("--no-build", action="store_true", help="skip the artifacts")
    system_install.add_argument("--no-start", action="store_true", help="enable, do not start")
    system_install.set_defaults(handler=cmd_system_install)
    system_uninstall = system_commands.add_parser(
        "uninstall", parents=[common], help="remove the unit and the user (config and voices kept)"
    )
    system_uninstall.add_argument("--root", type=Path, default=Path("/"))
    system_uninstall.add_argument(
        "--purge", action="store_true", help="also remove the config and the voices"
    )
    system_uninstall.set_defaults(handler=cmd_system_uninstall)

    devices = commands.add_parser("devices", parents=[common], help="list audio output devices")
    devices.set_defaults(handler=cmd_devices)

    config = commands.add_parser("config", parents=[common], help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = config_commands.add_parser("check", parents=[common], help="validate a config file")
    check.add_argument("path", type=Path, nargs="?", help="file to check (default: the one in use)")
    check.set_defaults(handler=cmd_config_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
