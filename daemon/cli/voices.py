"""`fastvoice voices`: this box's voices and their backend; and `voices list | install | remove
| show`, Piper's catalogue on this box.

Nothing here downloads unless asked: the catalogue is read by `list` (without `--installed`)
and `install`, from the configured location or a local mirror (`--from DIR`, a folder laid out
like the catalogue: its voices.json and the files at their catalogue paths).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.cli.options import setup
from daemon.errors import FastvoiceError, VoiceError

if TYPE_CHECKING:
    from daemon.config import Config, VoiceConfig


def cmd_voices(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box

    config = load_on_box(args.config)
    registry, reason = setup(config)
    infos = [registry.get(name).info for name in registry.usable()]
    broken = list(registry.broken.values())
    gpu = registry.backend.gpu_report()
    if args.json:
        report = {
            "backend": registry.backend.name,
            "backend_reason": reason,
            "gpu": gpu,
            "voices": [info.as_dict() for info in infos],
            "broken": [voice.as_dict() for voice in broken],
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
    for voice in broken:
        marker = "*" if voice.name == config.voice else " "
        print(f"{voice.name + marker:<24} BROKEN: {voice.error}\n{'':<24} fix: {voice.fix}")
    print("* default voice")
    print(f"backend: {reason}")
    for decision in (gpu or {}).get("budget", {}).get("decisions", []):
        print(f"  {decision['stage']} -> {decision['backend']}: {decision['reason']}")
    return 0


def add_commands(commands, common: argparse.ArgumentParser) -> None:
    """`voices` and its catalogue actions."""
    voices = commands.add_parser(
        "voices",
        parents=[common],
        help="this box's voices and their backend; list, install, remove, show catalogue voices",
    )
    voices.add_argument("--json", action="store_true", help="machine-readable output")
    voices.set_defaults(handler=cmd_voices)
    _add_catalogue_commands(voices, common)


def _add_catalogue_commands(
    voices: argparse.ArgumentParser, common: argparse.ArgumentParser
) -> None:
    actions = voices.add_subparsers(dest="voices_command", metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="the catalogue's voices (installed ones marked)"
    )
    listing.add_argument("--language", help="only this language (de, de_DE, ...)")
    listing.add_argument("--installed", action="store_true", help="only installed voices")
    listing.add_argument("--from", dest="mirror", type=Path, help="a local catalogue folder")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=cmd_list)

    install = actions.add_parser(
        "install", parents=[common], help="download, check and install voices, then build them"
    )
    install.add_argument("names", nargs="+", metavar="NAME", help="catalogue key or alias")
    install.add_argument("--from", dest="mirror", type=Path, help="a local catalogue folder")
    install.add_argument(
        "--no-build", action="store_true", help="skip the artifacts and loudness measurement"
    )
    install.set_defaults(handler=cmd_install)

    remove = actions.add_parser("remove", parents=[common], help="remove installed voices")
    remove.add_argument("names", nargs="+", metavar="NAME")
    remove.set_defaults(handler=cmd_remove)

    show = actions.add_parser("show", parents=[common], help="one voice: files, speakers, loudness")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=cmd_show)


def _catalog(config, mirror: Path | None):
    """(entries, files base) of the configured catalogue or of a local mirror."""
    from daemon.voices.catalog import read_catalog

    if mirror is not None:
        if not (mirror / "voices.json").is_file():
            raise FastvoiceError(f"--from {mirror}: no voices.json there")
        return read_catalog(str(mirror / "voices.json")), str(mirror)
    return read_catalog(config.catalog.url), config.catalog.files_url


def _installed(config) -> dict[str, Any]:
    from daemon.voices.installed import installed, voices_dir

    return installed(voices_dir(config.catalog.dir))


def cmd_list(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.voices.bundled import available

    config = load_on_box(args.config)
    rows = _box_rows(config) if args.installed else _catalogue_rows(config, args.mirror)
    language = (args.language or "").replace("-", "_").lower()
    rows = [
        row
        for row in rows
        if not language
        or row["language"].lower() in (language, language.split("_")[0])
        or row["language"].split("_")[0].lower() == language
    ]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no voices" + (f" in {args.language!r}" if args.language else ""))
    else:
        _print_rows(rows)
    if args.installed:
        extras = sorted(set(available()) - {row["name"] for row in rows})
        if extras:
            print(f"installable with no download (installed extras): {', '.join(extras)}")
    return 0


def _catalogue_rows(config: Config, mirror: Path | None) -> list[dict[str, Any]]:
    """The catalogue's voices and those of the installed extras, each marked installed or not.
    A configured catalogue out of reach (an offline box) is said on stderr, and the voices on
    the box stand in for it; a `--from` folder that cannot be read is an error."""
    from daemon.voices.catalog import CatalogUnreachable
    from daemon.voices.registry import voice_configs

    try:
        entries = _catalog(config, mirror)[0]
    except CatalogUnreachable as error:
        if mirror is not None:
            raise
        print(
            f"the catalogue is out of reach ({error}): the voices on this box and those of its "
            "installed extras follow",
            file=sys.stderr,
        )
        rows = _box_rows(config)
        on_box = {row["name"] for row in rows}
    else:
        on_box = set(voice_configs(config))
        rows = [
            {**entry.summary(), "installed": name in on_box}
            for name, entry in sorted(entries.items())
        ]
    return rows + _bundled_rows({row["name"] for row in rows}, on_box)


def _bundled_rows(listed: set[str], on_box: set[str]) -> list[dict[str, Any]]:
    """The voices the installed extras bring that `listed` leaves out, as catalogue rows
    (installed: among `on_box`)."""
    from daemon.voices.bundled import available

    return [
        {
            "name": name,
            "language": "ja_JP",
            "language_name": "Japanese",
            "quality": "kokoro",
            "speakers": 1,
            "size_bytes": 0,  # installed with the extra
            "installed": name in on_box,
        }
        for name in sorted(set(available()) - listed)
    ]


def _print_rows(rows: list[dict[str, Any]]) -> None:
    print(f"{'name':<36} {'language':<22} {'quality':<8} {'speakers':>8} {'size':>8}")
    for row in rows:
        mark = "*" if row["installed"] else " "
        language_name = f"{row['language']} {row['language_name']}".strip()[:22]
        size = f"{row['size_bytes'] / 1e6:.0f} MB" if row["size_bytes"] else "-"
        print(
            f"{row['name'] + mark:<36} {language_name:<22} {row['quality']:<8} "
            f"{row['speakers']:>8} {size:>8}"
        )
        broken = row.get("broken")
        if broken:
            print(f"{'':<4}BROKEN: {broken['error']}\n{'':<4}fix: {broken['fix']}")
    print("* installed")


def _box_rows(config) -> list[dict[str, Any]]:
    """The voices on this box, each loaded to tell whether it works: the installed ones (with
    their catalogue entries) and the configured ones (the embedded voice among them)."""
    from daemon.voices.bundled import installed_bundled
    from daemon.voices.installed import voices_dir

    installed = _installed(config)
    bundled = installed_bundled(voices_dir(config.catalog.dir))
    registry, _ = setup(config)
    usable = set(registry.usable())
    rows = []
    for name in registry.names:
        source = _source(config, name, installed, bundled)
        if source == "catalogue":
            row = {**installed[name].entry.summary(), "source": source}
        else:
            info = registry.get(name).info if name in usable else None
            row = {
                "name": name,
                "language": info.language if info else "",
                "language_name": "",
                "quality": "",
                "speakers": max(1, len(info.speakers)) if info else 0,
                "size_bytes": 0,
                "source": source,
            }
        broken = registry.broken.get(name)
        rows.append({**row, "installed": True, "broken": broken.as_dict() if broken else None})
    return rows


def _source(config: Config, name: str, installed: dict[str, Any], bundled: dict[str, Any]) -> str:
    """Where a voice on the box comes from: the catalogue, an installed extra, or the config."""
    if name in installed:
        return "catalogue"
    return "extra" if name in bundled and name not in config.voices else "config"


class _Bars:
    """One progress bar per file on stderr (tqdm), updated from the install's byte counts."""

    def __init__(self) -> None:
        self.bars: dict[str, Any] = {}

    def __call__(self, transfer) -> None:
        from tqdm import tqdm

        bar = self.bars.get(transfer.file)
        if bar is None:
            bar = tqdm(
                total=transfer.total,
                desc=transfer.file,
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                leave=True,
            )
            self.bars[transfer.file] = bar
        bar.update(transfer.done - bar.n)
        if transfer.done >= transfer.total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def cmd_install(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.runtime.artifacts import default_store
    from daemon.voices.bundled import is_bundled
    from daemon.voices.catalog import find
    from daemon.voices.install import install, install_bundled
    from daemon.voices.installed import voices_dir

    config = load_on_box(args.config)
    root = voices_dir(config.catalog.dir)
    for name in filter(is_bundled, args.names):  # nothing to download: they come with an extra
        install_bundled(root, name, config.runtime.artifact_dir or default_store())
        print(f"installed {name} (ja_JP), bundled with the kokoro extra")
        if not args.no_build:
            _build(config, name)
    from_catalogue = [name for name in args.names if not is_bundled(name)]
    entries, base = _catalog(config, args.mirror) if from_catalogue else ({}, "")
    wanted = [find(entries, name) for name in from_catalogue]  # all known before a download
    for entry in wanted:
        bars = _Bars()
        try:
            voice = install(config.catalog, entry, base, progress=bars)
        finally:
            bars.close()
        print(f"installed {voice.name} ({entry.language.code}) in {voice.folder}")
        if not args.no_build:
            _build(config, voice.name)
    print(
        "a running service takes new voices at `systemctl reload fastvoice` (SIGHUP) or the "
        "MQTT command <base_topic>/voices/install"
    )
    return 0


def _build(config, name: str) -> None:
    """The new voice's artifacts and loudness, as `fastvoice build` makes them."""
    from daemon.runtime.artifacts import default_store
    from edge_build.build import builder_for

    store = config.runtime.artifact_dir or default_store()
    results = builder_for(config, store, name).build_cpu(
        precision=config.runtime.precision,
        force=False,
        verify=False,
        progress=lambda text: print(text, file=sys.stderr, flush=True),
    )
    for result in results:
        print(f"  {result.stage}: {result.status} ({result.seconds:.1f} s)")


def cmd_remove(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.voices.install import remove

    config = load_on_box(args.config)
    for name in args.names:
        if name == config.voice:
            raise VoiceError(
                f"{name!r} is the default voice (`voice:` in the config); choose another first"
            )
        folder = remove(config.catalog, name)
        print(f"removed {name} from {folder}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from daemon.admin.config_checks import load_on_box
    from daemon.runtime.artifacts import default_store
    from daemon.voices import loudness
    from daemon.voices.bundled import installed_bundled
    from daemon.voices.installed import voices_dir
    from daemon.voices.registry import voice_configs

    config = load_on_box(args.config)
    configs = voice_configs(config)
    installed = _installed(config)
    if args.name not in configs:
        known = ", ".join(sorted(configs))
        raise VoiceError(f"voice {args.name!r} is not on this box (voices: {known})")
    bundled = installed_bundled(voices_dir(config.catalog.dir))
    source = _source(config, args.name, installed, bundled)
    described: dict[str, Any] = {"name": args.name, "installed": True, "source": source}
    if args.name in installed:
        described["catalogue"] = installed[args.name].describe()
        described["speaker_names"] = sorted(
            installed[args.name].entry.speaker_id_map,
            key=installed[args.name].entry.speaker_id_map.get,
        )
    voice_config = configs[args.name]
    described["settings"] = voice_config.model_dump(mode="json")
    record = _loudness_record(
        args.name, voice_config, config.runtime.artifact_dir or default_store()
    )
    if record is not None:
        measured = loudness.read(record)
        described["loudness"] = None if measured is None else measured.as_dict()
    if args.json:
        print(json.dumps(described, indent=2, ensure_ascii=False))
        return 0
    for key, value in described.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        print(f"{key}: {shown}")
    if record is not None and described["loudness"] is None:
        print("loudness not measured yet: `fastvoice build` measures it")
    return 0


def _loudness_record(name: str, voice_config: VoiceConfig, store: Path) -> Path | None:
    """Where `fastvoice build` keeps the voice's measured loudness; None for a family whose
    level is not measured (CosyVoice 2)."""
    if voice_config.family == "vits":
        from daemon.voices.piper_files import loudness_record, voice_files

        return loudness_record(store, *voice_files(name, voice_config), voice_config)
    if voice_config.family == "kokoro":
        from daemon.voices.kokoro import loudness_record

        return loudness_record(store, voice_config)
    return None
