"""Property-based fuzzing of every parser that sees outside input (hypothesis).

Each parser either accepts an input or rejects it with its own error type and a message that
names the problem; nothing else may escape, and no input may take longer than the deadline.
"""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import timedelta

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.adapters.hermes import HermesTts
from daemon.adapters.wyoming_connection import EventRefused, WyomingConnection, read_event
from daemon.adapters.wyoming_server import WyomingServer
from daemon.config import (
    Config,
    HermesConfig,
    QueueConfig,
    TextConfig,
    parse_config,
    read_config_file,
)
from daemon.errors import ConfigError, FastvoiceError, TextError
from daemon.service.commands import (
    CommandError,
    SayCommand,
    check_reply_topic,
    parse_pause,
    parse_say,
    parse_stop,
    parse_voice,
    parse_volume,
)
from daemon.service.settings import Settings
from daemon.text.prepare import prepare
from daemon.text.script import Utterance
from tests.daemon_helpers import front_door_of

pytestmark = pytest.mark.slow  # hypothesis, thousands of examples

LIMIT = QueueConfig().max_payload_bytes


def hermes_settings(**hermes) -> Settings:
    return Settings(
        Config(
            hermes=HermesConfig(enabled=True, **hermes),
            queue={"max_payload_bytes": LIMIT},
        )
    )


MANY = settings(max_examples=2000, deadline=timedelta(seconds=1))
SOME = settings(
    max_examples=300,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow],
)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SAY_FIELDS = list(SayCommand.model_fields)
say_objects = st.dictionaries(
    st.sampled_from([*SAY_FIELDS, "colour", "Text", ""]), json_values, max_size=6
) | st.fixed_dictionaries(
    {"text": st.text(max_size=40)},
    optional={
        "id": json_values,
        "priority": json_values,
        "output": json_values,
        "reply_topic": json_values,
    },
)
# Bytes as they come off the network: junk, text, JSON of any shape, and near-valid commands.
payloads = (
    st.binary(max_size=300)
    | st.text(max_size=200).map(str.encode)
    | json_values.map(lambda value: json.dumps(value).encode())
    | say_objects.map(lambda value: json.dumps(value).encode())
)


def assert_named(error: Exception) -> None:
    message = str(error)
    assert message.strip(), f"{type(error).__name__} without a message"


@MANY
@given(payloads)
def test_say_payloads_are_commands_or_named_rejections(payload):
    try:
        command = parse_say(payload, LIMIT)
        check_reply_topic(command, "box", [])
    except CommandError as error:
        assert_named(error)
        return
    # An empty text is a command still: the intake refuses it (bad_text), as every interface does.
    assert isinstance(command, SayCommand) and isinstance(command.text, str)
    if command.reply_topic is not None:
        assert command.reply_topic.startswith("box/") and "#" not in command.reply_topic


@MANY
@given(say_objects)
def test_rejected_say_fields_are_named(data):
    try:
        parse_say(json.dumps(data).encode(), LIMIT)
    except CommandError as error:
        message = str(error)
        assert any(key and key in message for key in [*data, "text"]), (data, message)


@MANY
@given(payloads, st.sampled_from([parse_stop, parse_pause, parse_volume, parse_voice]))
def test_control_payloads_are_values_or_named_rejections(payload, parser):
    try:
        value = parser(payload, LIMIT)
    except CommandError as error:
        assert_named(error)
        return
    if parser is parse_volume:
        assert 0.0 <= value <= 1.0
    elif parser is parse_pause:
        assert isinstance(value, bool)
    elif parser is parse_voice:
        assert value and len(value) <= 64


@MANY
@given(st.binary(min_size=1025, max_size=4096))
def test_oversized_payloads_are_refused_by_size(payload):
    for parser in (parse_say, parse_stop, parse_pause, parse_volume, parse_voice):
        with pytest.raises(CommandError, match="above the maximum 1024"):
            parser(payload, 1024)


hermes_objects = st.fixed_dictionaries(
    {"text": json_values | st.text(max_size=40)},
    optional={
        "siteId": json_values | st.sampled_from(["default", "x/#", "+", "kitchen"]),
        "id": json_values,
        "sessionId": json_values,
        "lang": json_values,
        "volume": json_values,
    },
)


@MANY
@given(payloads | hermes_objects.map(lambda value: json.dumps(value).encode()))
def test_hermes_say_is_submitted_answered_with_an_error_or_left_alone(payload):
    submitted, published = [], []
    hermes = HermesTts(
        hermes_settings(any_site=True, remote_playback=True),
        lambda command: submitted.append(command),
        lambda topic, body, _retain: published.append((topic, json.loads(body))),
    )
    hermes.on_say("hermes/tts/say", payload)
    assert len(submitted) + len(published) == 1
    if published:
        topic, answer = published[0]
        assert topic == "hermes/error/tts" and answer["error"].strip()
    else:
        topic = submitted[0].reply_topic
        assert topic.startswith("hermes/audioServer/") and not set(topic) & {"#", "+"}
        assert topic.count("/") == 4


@MANY
@given(payloads)
def test_hermes_play_finished_never_raises(payload):
    hermes = HermesTts(hermes_settings(remote_playback=True), list, print)
    hermes.on_play_finished("hermes/audioServer/default/playFinished", payload)


wyoming_headers = st.fixed_dictionaries(
    {"type": json_values | st.sampled_from(["synthesize", "describe", "audio-chunk"])},
    optional={
        "data": json_values,
        "data_length": st.integers(-5, 3000) | json_values,
        "payload_length": st.integers(-5, 3000) | json_values,
        "version": json_values,
    },
)
wyoming_streams = st.binary(max_size=400) | st.tuples(
    wyoming_headers.map(lambda h: json.dumps(h).encode() + b"\n"), st.binary(max_size=400)
).map(lambda parts: parts[0] + parts[1])


@MANY
@given(wyoming_streams)
def test_wyoming_framing_reads_an_event_nothing_or_refuses(stream):
    async def read():
        reader = asyncio.StreamReader(limit=1024)
        reader.feed_data(stream)
        reader.feed_eof()
        return await read_event(reader, max_bytes=1000)

    try:
        event = asyncio.run(read())
    except EventRefused as error:
        assert_named(error)
        return
    if event is not None:
        assert isinstance(event.type, str) and isinstance(event.data, dict)
        assert event.payload is None or len(event.payload) <= 1000


wyoming_events = st.tuples(
    st.sampled_from(
        ["describe", "synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop", "x"]
    ),
    st.dictionaries(
        st.sampled_from(["text", "voice", "name", "speaker", "language"]),
        json_values
        | st.text(alphabet="Hi. there", max_size=12)
        | st.fixed_dictionaries({}, optional={"name": json_values, "speaker": json_values}),
        max_size=3,
    ),
)


@pytest.fixture(scope="module")
def wyoming_server(synthesizer, config):
    limited = config.model_copy(
        update={"queue": config.queue.model_copy(update={"max_payload_bytes": LIMIT})}
    )
    return WyomingServer("tcp://127.0.0.1:0", front_door_of(synthesizer, Settings(limited)))


async def handle(server: WyomingServer, events: list) -> list:
    """Runs the real per-connection handler over a socket pair; returns the events it sent."""
    from wyoming.event import Event

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    peer_reader, peer_writer = await asyncio.open_connection(sock=theirs)
    client = WyomingConnection(reader, writer, server.speech)
    answers: list = []

    async def collect() -> None:
        while (event := await read_event(peer_reader, 1 << 24)) is not None:
            answers.append(event)

    collecting = asyncio.create_task(collect())
    for kind, data in events:
        assert await client.handle_event(Event(type=kind, data=data)) is True
    writer.close()
    await collecting
    peer_writer.close()
    return answers


@SOME
@given(st.lists(wyoming_events, max_size=4))
def test_wyoming_events_get_answers_or_errors_never_exceptions(wyoming_server, events):
    answers = asyncio.run(handle(wyoming_server, events))
    for answer in answers:
        if answer.type == "error":
            assert answer.data["text"].strip() and answer.data["code"]


@MANY
@given(
    st.text(max_size=600)
    | st.text(alphabet=" .!?\n\t,;x", max_size=600)
    | st.integers()
    | st.none()
)
def test_text_frontend_gives_bounded_sentences_or_a_text_error(registry, text):
    """Plain text: normalised, then cut into sentences of at most the configured length."""
    config = TextConfig(max_chars=500, max_sentence_chars=40)
    try:
        script = prepare(text, config, registry.default, registry)
    except TextError as error:
        assert_named(error)
        return
    utterances = [item for item in script if isinstance(item, Utterance)]
    assert utterances
    for utterance in utterances:
        assert utterance.words().strip() and len(utterance.words()) <= 40


@SOME
@given(st.text(max_size=80))
def test_phonemizer_takes_any_text(registry, voice, text):
    """espeak-ng runs in our process: an input that crashed it would take the service down."""
    try:
        script = prepare(text, TextConfig(), voice.name, registry)
    except TextError:
        return
    for utterance in script:
        for phonemes in voice.phonemes(utterance.parts):
            assert all(isinstance(i, int) for i in voice.phoneme_ids(phonemes))


config_keys = st.sampled_from([*Config.model_fields, "mqtt.port", "bogus"])
config_documents = st.dictionaries(
    config_keys,
    json_values
    | st.dictionaries(
        st.sampled_from(["host", "port", "base_topic", "max_jobs", "enabled", "uri", "x"]),
        json_values,
        max_size=3,
    ),
    max_size=4,
)


@MANY
@given(config_documents | json_values)
def test_config_documents_are_configs_or_errors_naming_a_key(document):
    try:
        parse_config(document)
    except ConfigError as error:
        lines = str(error).splitlines()
        assert lines[0].startswith("config:")
        if isinstance(document, dict) and document:
            assert any(":" in line for line in lines[1:]) or "mapping" in lines[0], lines


@SOME
@given(st.binary(max_size=500) | config_documents.map(lambda d: yaml.safe_dump(d).encode()))
def test_config_files_are_configs_or_one_clear_error(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / "fastvoice.yaml"
    path.write_bytes(raw)
    try:
        read_config_file(path)
    except FastvoiceError as error:
        assert str(error).startswith(str(path))
