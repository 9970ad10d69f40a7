"""Rhasspy Hermes TTS through a real mosquitto, with rhasspy-hermes's own message classes."""

from __future__ import annotations

import io
import json
import uuid
import wave

import numpy as np
import pytest
from rhasspyhermes.audioserver import AudioPlayBytes, AudioPlayFinished
from rhasspyhermes.tts import TtsSay, TtsSayFinished

from tests.conftest import EMBEDDED_RATE
from tests.daemon_helpers import Daemon

ERROR = "hermes/error/tts"


def hermes_daemon(broker, capture, directory, **hermes) -> Daemon:
    return Daemon(
        broker,
        directory,
        capture.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        recorder_options={"also": ("hermes/#",)},
        hermes={"enabled": True, "site_id": "kitchen", **hermes},
    )


@pytest.fixture
def kitchen(broker, capture, tmp_path):
    running = hermes_daemon(broker, capture, tmp_path)
    yield running
    running.stop()


def ask(daemon: Daemon, **fields) -> TtsSay:
    say = TtsSay(**fields)
    daemon.recorder.publish_to(TtsSay.topic(), say.to_json())
    return say


def said_finished(daemon: Daemon, request_id: str) -> TtsSayFinished:
    _, payload, _ = daemon.recorder.wait_for(
        lambda t, p: t == TtsSayFinished.topic() and json.loads(p)["id"] == request_id
    )
    return TtsSayFinished.from_json(payload)


def test_say_is_spoken_and_answered_once_with_its_ids(kitchen, capture):
    ask(kitchen, text="The oven is preheated.", site_id="kitchen", id="req-1", session_id="s-1")
    finished = said_finished(kitchen, "req-1")
    assert (finished.site_id, finished.session_id) == ("kitchen", "s-1")
    assert capture.played("default").size > EMBEDDED_RATE // 2  # it was played on the box
    ask(kitchen, text="Second.", site_id="kitchen", id="req-2")
    said_finished(kitchen, "req-2")  # req-1 had every chance to be answered twice by now
    answers = [
        json.loads(p)["id"] for t, p, _ in kitchen.recorder.seen if t == TtsSayFinished.topic()
    ]
    assert answers == ["req-1", "req-2"]


def test_ssml_is_spoken(kitchen, capture):
    text = '<speak>Dinner <break time="900ms"/> is ready.</speak>'
    ask(kitchen, text=text, site_id="kitchen", id="ssml-1")
    said_finished(kitchen, "ssml-1")
    played = np.trim_zeros(capture.played("default"))
    silent = np.abs(played) < 1e-3
    longest = max(len(run) for run in "".join("1" if q else "0" for q in silent).split("0"))
    assert longest >= 0.85 * EMBEDDED_RATE


def test_other_sites_are_left_alone(kitchen):
    ask(kitchen, text="Not for this box.", site_id="garage", id="garage-1")
    ask(kitchen, text="For this box.", site_id="kitchen", id="kitchen-1")
    said_finished(kitchen, "kitchen-1")
    answered = [json.loads(p)["id"] for t, p, _ in kitchen.recorder.seen if t.startswith("hermes/")
                and t != TtsSay.topic()]  # fmt: skip
    assert answered == ["kitchen-1"]
    queued = [json.loads(p) for t, p, _ in kitchen.recorder.seen if t.endswith("/events")]
    assert [e["event"] for e in queued].count("queued") == 1


BAD = [
    (b"not json at all", "invalid JSON"),
    (b'{"text": "hi", "siteId": "kitchen", "colour": "red"}', "colour: unknown field"),
    (b'{"text": "hi", "siteId": "kitchen", "volume": 2}', "volume: 2 is above the maximum"),
    # The protocol's names, in the message and in what is taken (not the Python fields').
    (b'{"text": "hi", "siteid": "kitchen"}', "(the fields are text, siteId, lang, id, sessionId,"),
    (b'{"text": "hi", "site_id": "kitchen"}', "site_id: unknown field"),
    (b'{"text": "hi", "siteId": "kitchen", "lang": "french!"}', "lang: "),
]


def test_bad_payloads_get_hermes_errors_and_the_box_goes_on(kitchen):
    for payload, _ in BAD:
        kitchen.recorder.publish_to(TtsSay.topic(), payload)
    ask(kitchen, text="Still answering.", site_id="kitchen", id="after", lang="en-US")
    said_finished(kitchen, "after")
    errors = [json.loads(p) for t, p, _ in kitchen.recorder.seen if t == ERROR]
    assert len(errors) == len(BAD)
    for error, (_, expected) in zip(errors, BAD, strict=True):
        assert expected in error["error"], error
        assert error["siteId"] == "kitchen"


def test_remote_playback_sends_wav_and_waits_for_play_finished(broker, capture, tmp_path):
    remote = hermes_daemon(broker, capture, tmp_path, remote_playback=True)
    try:
        ask(remote, text="Played elsewhere.", site_id="kitchen", id="far", session_id="s-9")
        topic, wav, _ = remote.recorder.wait_for(
            lambda t, p: AudioPlayBytes.is_topic(t) and AudioPlayBytes.get_site_id(t) == "kitchen"
        )
        with wave.open(io.BytesIO(wav)) as audio:
            assert audio.getframerate() == EMBEDDED_RATE and audio.getnframes() > EMBEDDED_RATE // 2
        request_id = AudioPlayBytes.get_request_id(topic)
        remote.recorder.event(request_id, "finished")
        played = AudioPlayFinished(id=request_id, session_id="s-9")
        remote.recorder.publish_to(AudioPlayFinished.topic(site_id="kitchen"), played.to_json())
        finished = said_finished(remote, "far")
        assert finished.session_id == "s-9"
        order = [t for t, _, _ in remote.recorder.seen]
        assert order.index(TtsSayFinished.topic()) > order.index(
            AudioPlayFinished.topic(site_id="kitchen")
        )
        assert capture.played("default").size == 0  # not played on the box itself
    finally:
        remote.stop()
