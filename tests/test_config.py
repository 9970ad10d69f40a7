import json
import os
import socket
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from daemon.admin.config_checks import load_on_box, on_box
from daemon.config import Config, parse_config, read_config_file
from daemon.errors import ConfigError
from tests.conftest import REPO, run_cli


def write(tmp_path: Path, text: str, name: str = "fastvoice.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def read_on_box(path):
    """The file parsed, then checked on the box, as `serve` and `config check` read it."""
    return on_box(read_config_file(path), str(path))


def error_of(data) -> str:
    with pytest.raises(ConfigError) as caught:
        on_box(parse_config(data))
    return str(caught.value)


def test_shipped_default_file_is_exactly_the_builtin_defaults():
    shipped = read_on_box(REPO / "config" / "fastvoice.yaml")
    assert shipped.model_dump() == Config().model_dump()
    assert set(yaml.safe_load((REPO / "config" / "fastvoice.yaml").read_text())) == set(
        Config.model_fields
    )


def unwritten(model: type[BaseModel], written: dict, prefix: str = "") -> list[str]:
    """The key paths of `model`'s settings that `written` leaves out (a section's own keys
    included; the items of lists and mappings are examples, not settings)."""
    missing = []
    for name, field in model.model_fields.items():
        if name not in written:
            missing.append(prefix + name)
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            missing += unwritten(field.annotation, written[name] or {}, f"{prefix}{name}.")
    return missing


def test_every_setting_is_written_out_in_the_shipped_file():
    """config/fastvoice.yaml is the complete reference: a new setting cannot be left out."""
    shipped = yaml.safe_load((REPO / "config" / "fastvoice.yaml").read_text())
    assert unwritten(Config, shipped) == []


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path):
    read_on_box(path)


def test_value_above_maximum_names_key_path_and_value():
    assert "audio.volume: 1.7 is above the maximum 1.0" in error_of({"audio": {"volume": 1.7}})


def test_value_below_minimum_names_key_path_and_value():
    message = error_of({"text": {"max_chars": 0}})
    assert "text.max_chars: 0 is below the minimum 1" in message


def test_unknown_keys_rejected_at_any_depth():
    message = error_of({"audio": {"colour": "red"}, "extra": 1})
    assert "audio.colour: unknown key" in message
    assert "extra: unknown key" in message


def test_wrong_choice_lists_allowed_values():
    message = error_of({"runtime": {"backend": "cuda"}})
    assert (
        "runtime.backend: 'cuda' is not one of 'auto', 'trt', 'ort-trt', 'ort-cuda' or 'ort-cpu'"
        in message
    )


def test_default_voice_must_be_configured():
    message = error_of({"voice": "nobody"})
    assert "'nobody' is not among the voices (en_US-joe-medium)" in message


KOKORO_ALPHA = "ja_JP-kokoro-jf_alpha"


def test_an_installed_kokoro_voice_may_be_the_default(tmp_path):
    """As an installed Piper voice may. The record is the one `voices install` writes once the
    voice spoke its test sentence (that trial is tests/test_kokoro.py's); a Kokoro voice not
    installed yet is named with the command that installs it."""
    from daemon.voices.bundled import available, write_record

    voices = tmp_path / "voices"
    config = write(tmp_path, json.dumps({"voice": KOKORO_ALPHA, "catalog": {"dir": str(voices)}}))
    refused = run_cli("config", "check", str(config))
    assert refused.returncode == 2
    assert f"fastvoice voices install {KOKORO_ALPHA}".encode() in refused.stderr
    write_record(voices, KOKORO_ALPHA, available()[KOKORO_ALPHA])
    checked = run_cli("config", "check", str(config))
    assert checked.returncode == 0, checked.stderr


def test_the_kokoro_styles_taken_are_those_the_package_ships():
    import numpy as np

    from daemon.config.voices import KOKORO_STYLES
    from daemon.voices.kokoro import package_data

    with package_data("voices_ja.npz").open("rb") as handle, np.load(handle) as styles:
        assert sorted(styles.files) == sorted(KOKORO_STYLES)
    for style in ("jm_kumo", "jf_alpha(2)+jf_nezumi", "jf_alpha(0.5)+jf_tebukuro(1.5)"):
        parse_config({"voice": "v", "voices": {"v": {"family": "kokoro", "style": style}}})


@pytest.mark.parametrize(
    ("style", "problem"),
    [
        ("jf_alpha+jf_nobody", "'jf_nobody' is not a Kokoro style"),
        ("af_heart", "'af_heart' is not a Kokoro style"),
        ("jf_alpha(0)", "'jf_alpha(0)': a weight of 0 leaves the style out"),
        ("jf_alpha(2)+jm_kumo(0)", "'jm_kumo(0)': a weight of 0 leaves the style out"),
    ],
)
def test_a_kokoro_style_that_does_not_exist_is_refused_naming_those_that_do(style, problem):
    """At config check, not when the voice loads (and is quarantined)."""
    message = error_of({"voice": "mix", "voices": {"mix": {"family": "kokoro", "style": style}}})
    assert f"voices.mix.style: {problem}" in message
    assert "(styles: jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo)" in message


def test_voice_needs_exactly_one_source():
    assert "exactly one of 'package' or 'model'" in error_of({"voices": {"x": {"family": "vits"}}})
    message = error_of({"voices": {"x": {"package": "a", "model": "b.onnx"}}})
    assert "voices.x: give exactly one of 'package' or 'model'" in message


def test_voice_names_cannot_be_paths():
    message = error_of({"voices": {"../etc": {"package": "a"}}, "voice": "../etc"})
    assert "voices.../etc" in message or "voice:" in message


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    path = write(tmp_path, "voice: v\nvoices:\n  v:\n    model: voices/v.onnx\n")
    config = read_on_box(path)
    assert config.voices["v"].model == tmp_path / "voices" / "v.onnx"


def test_empty_file_means_defaults(tmp_path):
    assert read_on_box(write(tmp_path, "")).model_dump() == Config().model_dump()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"audio: [1\n", "invalid YAML at line 2"),
        (b"\xff\xfe\x00junk", "not UTF-8 text"),
        (b"- a\n- b\n", "the top level must be a mapping of keys, got list"),
        (b"audio: {volume: loud}\n", "audio.volume: 'loud'"),
    ],
)
def test_broken_files_give_one_clear_message(tmp_path, content, expected):
    path = tmp_path / "broken.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        read_on_box(path)
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        read_on_box(tmp_path / "missing.yaml")


def test_password_from_file_with_private_mode(tmp_path):
    secret = tmp_path / "mqtt.pass"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    config = read_on_box(write(tmp_path, "mqtt:\n  password_file: mqtt.pass\n"))
    assert config.mqtt.password().get_secret_value() == "s3cret"
    assert "s3cret" not in repr(config) and "s3cret" not in str(config.model_dump())


def test_password_file_readable_by_others_is_refused(tmp_path):
    secret = tmp_path / "mqtt.pass"
    secret.write_text("s3cret")
    secret.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mqtt.password_file: .* is readable by others"):
        read_on_box(write(tmp_path, "mqtt:\n  password_file: mqtt.pass\n"))


def test_password_from_environment(monkeypatch):
    monkeypatch.setenv("FV_TEST_PASSWORD", "from-env")
    config = on_box(parse_config({"mqtt": {"password_env": "FV_TEST_PASSWORD"}}))
    assert config.mqtt.password().get_secret_value() == "from-env"
    monkeypatch.delenv("FV_TEST_PASSWORD")
    assert "'FV_TEST_PASSWORD' is not set" in error_of(
        {"mqtt": {"password_env": "FV_TEST_PASSWORD"}}
    )


def test_base_topic_expands_hostname_and_refuses_wildcards():
    assert parse_config({}).mqtt.base_topic == f"fastvoice/{socket.gethostname()}"
    assert "is not a plain topic" in error_of({"mqtt": {"base_topic": "fastvoice/#"}})


def test_config_file_from_environment_then_explicit(tmp_path, monkeypatch):
    from_env = write(tmp_path, "audio: {volume: 0.3}\n", "env.yaml")
    explicit = write(tmp_path, "audio: {volume: 0.6}\n", "explicit.yaml")
    monkeypatch.setenv("FASTVOICE_CONFIG", str(from_env))
    assert load_on_box().audio.volume == 0.3
    assert load_on_box(explicit).audio.volume == 0.6


def test_config_check_command_exit_codes(tmp_path):
    good = run_cli("config", "check", str(REPO / "config" / "fastvoice.yaml"))
    assert good.returncode == 0, good.stderr
    bad = run_cli("config", "check", str(write(tmp_path, "audio: {volume: 1.7}\n")))
    assert bad.returncode == 2
    assert b"audio.volume: 1.7 is above the maximum 1.0" in bad.stderr
    assert b"Traceback" not in bad.stderr


def test_config_check_uses_fastvoice_config_env(tmp_path):
    bad = write(tmp_path, "nonsense: true\n")
    result = run_cli("config", "check", env={**os.environ, "FASTVOICE_CONFIG": str(bad)})
    assert result.returncode == 2
    assert b"nonsense: unknown key" in result.stderr


def test_parsing_reads_nothing_on_the_box_and_the_box_checks_name_the_key(tmp_path):
    data = {
        "sounds": {"dir": str(tmp_path), "chime_by_priority": {"high": "no-such-chime"}},
        "text": {"lexicon": {"file": str(tmp_path / "absent.yaml")}},
    }
    parsed = parse_config(data)  # a pure model: no sounds directory or lexicon file read
    assert parsed.sounds.chime_by_priority["high"] == "no-such-chime"
    with pytest.raises(ConfigError) as caught:
        on_box(parsed)
    assert "sounds.chime_by_priority.high" in str(caught.value)
    assert "text.lexicon.file" in str(caught.value)
