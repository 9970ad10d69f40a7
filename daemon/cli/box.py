"""The commands that set up and look after this box: `serve`, `build`, `export`, `bench`,
`doctor`, `system install | uninstall`, `devices`, `wake-delay`, `config check`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon.errors import FastvoiceError


def cmd_serve(args: argparse.Namespace) -> int:
    from daemon.app.serve import serve

    return serve(args.config, wyoming=args.wyoming, unregister=args.unregister, http=args.http)


def cmd_build(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.runtime.artifacts import default_store
    from edge_build.build import build_voices

    config = load_on_box(args.config)
    store = config.runtime.artifact_dir or default_store()

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    results = build_voices(config, store, force=args.force, verify=args.verify, progress=progress)
    for result in results:
        print(f"{result.stage}: {result.status} ({result.seconds:.2f} s) {result.directory}")
    failed = [result.voice for result in results if result.failed]
    if failed:
        names = ", ".join(failed)
        print(f"fastvoice: error: cannot build {names} (the others are built)", file=sys.stderr)
        return 1
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
    """The side-by-side benchmark: tools/bench.py of the source checkout, or the copy the
    package installed under <prefix>/share/fastvoice."""
    import runpy

    from daemon.admin.system_install import shipped

    script = shipped("tools/bench.py")
    sys.argv = [str(script), *args.bench_args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.admin.doctor import FAIL, run_checks
    from daemon.config import config_path_in_use
    from daemon.errors import ConfigError

    path = config_path_in_use(args.config)
    try:
        config, problem = load_on_box(args.config), f"{path or 'built-in defaults'}: valid"
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
    from daemon.admin.system_install import install

    install(
        args.root,
        args.box,
        build=not args.no_build,
        start=not args.no_start,
        executable=args.executable,
    )
    return 0


def cmd_system_uninstall(args: argparse.Namespace) -> int:
    from daemon.admin.system_install import uninstall

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


def cmd_wake_delay(args: argparse.Namespace) -> int:
    from daemon.audio.wake_delay import measure
    from daemon.config import config_path_in_use, load_config

    device = args.device if args.device is not None else load_config(args.config).audio.device
    delay = measure(device, args.input)
    print(
        f"the output swallowed {delay.swallowed_ms} ms of a fresh stream (loop latency "
        f"{delay.latency_ms} ms): audio.lead_in_ms: {delay.lead_in_ms} advised"
    )
    if args.save:
        from daemon.admin.config_edit import set_block_setting

        path = config_path_in_use(args.config)
        if path is None:
            raise FastvoiceError("--save: no config file in use; name one with --config")
        set_block_setting(path, "audio", "lead_in_ms", delay.lead_in_ms)
        print(f"{path}: audio.lead_in_ms set to {delay.lead_in_ms} (a running service: reload)")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.config import config_path_in_use

    path = args.path or config_path_in_use(args.config)
    if path is None:
        print("no config file given or found; the built-in defaults are valid")
        return 0
    config = load_on_box(path)
    print(f"{path}: ok ({len(config.voices)} voice(s), default {config.voice!r})")
    return 0


# Over 60 lines: a table, the commands and their options as `--help` lists them.
def add_commands(commands, common: argparse.ArgumentParser) -> None:
    """Every command of the box."""
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
    system_install.add_argument(
        "--executable",
        type=Path,
        help="the fastvoice program the unit runs (default: this installation's)",
    )
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

    wake = commands.add_parser(
        "wake-delay",
        parents=[common],
        help="measure how much a late-waking amplifier swallows, through a loop-back",
        description="Plays a sweep on the output (as a job would, on a fresh stream) while the "
        "input records the amplifier's output; run it once the amplifier has gone to standby.",
    )
    wake.add_argument("--input", required=True, help="the input device the loop-back feeds")
    wake.add_argument("--device", help="the output device (default: the config's)")
    wake.add_argument(
        "--save", action="store_true", help="write the advised audio.lead_in_ms into the config"
    )
    wake.set_defaults(handler=cmd_wake_delay)

    config = commands.add_parser("config", parents=[common], help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = config_commands.add_parser("check", parents=[common], help="validate a config file")
    check.add_argument("path", type=Path, nargs="?", help="file to check (default: the one in use)")
    check.set_defaults(handler=cmd_config_check)
