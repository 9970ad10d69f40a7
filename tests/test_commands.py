import json

import pytest

from daemon.config import QueueConfig
from daemon.service.commands import (
    CommandError,
    check_reply_topic,
    parse_say,
    parse_stop,
    parse_volume,
    say_schema,
)
from daemon.service.jobs import DuplicateJob, Job, JobQueue, QueueFull
from tests.conftest import REPO

LIMIT = QueueConfig().max_payload_bytes


def test_published_schema_matches_the_model():
    published = json.loads((REPO / "docs" / "say.schema.json").read_text())
    assert published == say_schema(), "regenerate docs/say.schema.json from say_schema()"


def test_plain_text_payload_is_text_with_defaults():
    command = parse_say(b"Dinner is ready.", LIMIT)
    assert command.text == "Dinner is ready." and command.priority == "normal"
    assert command.output == "play" and command.id


def test_json_payload_with_every_field():
    payload = {
        "v": 1,
        "id": "door-1",
        "text": "Door open.",
        "voice": "v",
        "language": "en-US",
        "speaker": 2,
        "priority": "critical",
        "chime": "alarm",
        "volume": 0.5,
        "output": "both",
        "reply_topic": "speakers/hall",
        "format": "pcm",
        "sample_rate": 16000,
        "rate": 1.25,
        "sentence_pause_s": 0.5,
        "expires_s": 30,
        "at": 1796346000000,
        "sync": False,
        "captions": True,
    }
    command = parse_say(json.dumps(payload).encode(), LIMIT)
    assert command.model_dump() == payload


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"text": 1}', "text: 1: Input should be a valid string"),
        (b'{"text": "a", "priority": "urgent"}', "priority: 'urgent' is not one of"),
        (b'{"text": "a", "volume": 2}', "volume: 2 is above the maximum 1.0"),
        (b'{"text": "a", "at": 5, "output": "publish", "reply_topic": "a/b"}', "output 'publish'"),
        (b'{"text": "a", "at": -5}', "at: -5"),
        (b'{"text": "a", "id": "../x"}', "id: '../x'"),
        (b'{"text": "a", "v": 2}', "v: 2 is not one of 1"),
        (b'{"text": "a", "reply_topic": "$SYS/x", "output": "publish"}', "not a plain topic"),
        (b'{"text": "a", "expires_s": -1}', "expires_s: -1 is below"),
        (b'{"id": "j"}', "text: required key is missing"),
    ],
)
def test_bad_json_fields_are_named(payload, message):
    with pytest.raises(CommandError) as caught:
        parse_say(payload, LIMIT)
    assert message in str(caught.value)


def test_rejection_keeps_the_id_when_there_is_one():
    with pytest.raises(CommandError) as caught:
        parse_say(b'{"id": "abc", "text": "a", "bogus": 1}', LIMIT)
    assert caught.value.job_id == "abc"


@pytest.mark.parametrize(
    ("topic", "allowed"),
    [
        ("box/reply/1", True),
        ("speakers/hall", True),
        ("box", False),
        ("boxer/reply", False),
        ("speakersx/hall", False),
        ("other/box/reply", False),
    ],
)
def test_reply_topic_stays_under_the_base_topic_or_a_configured_prefix(topic, allowed):
    command = parse_say(
        json.dumps({"text": "a", "output": "publish", "reply_topic": topic}).encode(), LIMIT
    )
    if allowed:
        check_reply_topic(command, "box", ["speakers"])
    else:
        with pytest.raises(CommandError, match="is outside box/"):
            check_reply_topic(command, "box", ["speakers"])


def test_oversize_payload_is_refused_before_decoding():
    with pytest.raises(CommandError, match="payload is 2000 bytes, above the maximum 1024"):
        parse_say(b"\xff" * 2000, 1024)


@pytest.mark.parametrize(("payload", "expected"), [(b"", False), (b'{"all": true}', True)])
def test_stop_payloads(payload, expected):
    assert parse_stop(payload, LIMIT).all is expected


def test_stop_one_job_by_id_but_not_with_all():
    assert parse_stop(b'{"id": "job-7"}', LIMIT).id == "job-7"
    with pytest.raises(CommandError, match="either 'all' or 'id'"):
        parse_stop(b'{"id": "job-7", "all": true}', LIMIT)


@pytest.mark.parametrize(("payload", "expected"), [(b"0.4", 0.4), (b'{"volume": 1}', 1.0)])
def test_volume_payloads(payload, expected):
    assert parse_volume(payload, LIMIT) == expected


@pytest.mark.parametrize("payload", [b"1.5", b"loud", b"true", b'{"volume": 0.5, "x": 1}'])
def test_bad_volume_payloads(payload):
    with pytest.raises(CommandError):
        parse_volume(payload, LIMIT)


def job(text: str, priority: str = "normal", **fields) -> Job:
    return Job(
        parse_say(json.dumps({"text": text, "priority": priority, **fields}).encode(), LIMIT)
    )


def test_queue_orders_by_priority_then_arrival():
    queue = JobQueue(max_jobs=10)
    jobs = [job("a", "low"), job("b"), job("c", "high"), job("d"), job("e", "critical")]
    for item in jobs:
        queue.put(item)
    order = [queue.get(timeout=0).command.text for _ in jobs]
    assert order == ["e", "c", "b", "d", "a"]
    assert queue.get(timeout=0) is None


def test_queue_bound_and_duplicate_ids():
    queue = JobQueue(max_jobs=2)
    queue.put(job("a", id="one"))
    queue.put(job("b"))
    with pytest.raises(QueueFull):
        queue.put(job("c"))
    queue.get(timeout=0)
    with pytest.raises(DuplicateJob):
        queue.put(job("again", id="one"))


def test_paused_queue_hands_out_nothing():
    queue = JobQueue(max_jobs=2)
    queue.put(job("a"))
    queue.set_paused(True)
    assert queue.get(timeout=0.01) is None
    queue.set_paused(False)
    assert queue.get(timeout=0).command.text == "a"


def test_a_job_carries_its_text_prepared_once_and_is_spoken_from_it(synthesizer, monkeypatch):
    """The intake prepares a job's text to check it; the lane speaks that script, not the text
    prepared a second time (counted where the synthesizer prepares text)."""
    from daemon.speech import synthesizer as synthesizer_module
    from tests.daemon_helpers import front_door_of

    outbox_messages = []
    door = front_door_of(synthesizer)
    door._events.outbox.attach(lambda topic, payload, retain: outbox_messages.append(topic))
    assert door.submit(parse_say(b"Gate B12 at 10:45 am.", LIMIT)) is None
    (job,) = door._queue.snapshot()
    assert job.script == synthesizer.script("Gate B12 at 10:45 am.")
    prepared = []
    real_prepare = synthesizer_module.prepare
    monkeypatch.setattr(
        synthesizer_module, "prepare", lambda *a, **k: prepared.append(a) or real_prepare(*a, **k)
    )
    command = job.command
    pieces = list(synthesizer.synthesize(command.text, command.voice, script=job.script))
    assert any(not piece.silence for piece in pieces) and prepared == []
    list(synthesizer.synthesize(command.text, command.voice))
    assert len(prepared) == 1  # a recovered job, with no script, is prepared where it is spoken
