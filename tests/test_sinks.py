"""Sinks: the protocol every output of a job's audio follows (device, WAV files, MQTT, a pipe,
the tests' recording sink), what the service puts around what it plays (lead-in, tail), and
word times that follow the played stream."""

from __future__ import annotations

import asyncio
import io
import threading
import wave
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from daemon.audio.pcm_stream import decode_chunk
from daemon.audio.sinks import Padded, PublishSink, RawPcmSink, WavFileSink, deliver
from daemon.audio.sinks.handoff import Handoff
from daemon.errors import AudioDeviceError, FastvoiceError
from daemon.service.commands import SayCommand
from tests.conftest import EMBEDDED_RATE
from tests.recording_sink import RecordingSink, run_lane

RATE = 16_000


def tone(seconds: float, level: float = 0.5) -> np.ndarray:
    return np.full(round(seconds * RATE), level, np.float32)


def test_deliver_writes_every_block_to_every_sink_in_order():
    first, second = RecordingSink(), RecordingSink()
    blocks = [tone(0.1, 0.1), tone(0.2, 0.2)]
    assert deliver(iter(blocks), [first, second], RATE) is True
    for sink in (first, second):
        assert sink.rate == RATE and sink.complete is True
        assert [b[0] for b in sink.blocks] == pytest.approx([0.1, 0.2])


def test_a_stopped_sink_stops_the_making_and_every_sink_closes_incomplete():
    made = []

    def blocks():
        for number in range(10):
            made.append(number)
            yield tone(0.01)

    stopping, other = RecordingSink(stop_after_blocks=3), RecordingSink()
    assert deliver(blocks(), [stopping, other], RATE) is False
    assert made == [0, 1, 2] and len(other.blocks) == 2  # the third went to the stopped one only
    assert stopping.complete is False and other.complete is False


def test_a_failure_while_making_closes_each_sink_incomplete_and_is_raised():
    def blocks():
        yield tone(0.01)
        raise FastvoiceError("the voice failed")

    sinks = [RecordingSink(), RecordingSink()]
    with pytest.raises(FastvoiceError, match="the voice failed"):
        deliver(blocks(), sinks, RATE)
    assert [sink.complete for sink in sinks] == [False, False]


def test_padding_puts_silence_before_and_after_and_moves_the_lead():
    inner = RecordingSink()
    padded = Padded(inner, lead_s=0.5, tail_s=0.25)
    assert padded.lead_s == 0.5
    assert deliver([tone(1.0)], [padded], RATE)
    audio = inner.audio
    assert len(audio) == round(1.75 * RATE)
    nonzero = np.flatnonzero(audio)
    assert nonzero[0] == round(0.5 * RATE) and len(audio) - 1 - nonzero[-1] == round(0.25 * RATE)
    cut = Padded(RecordingSink(), lead_s=0.5, tail_s=0.25)
    deliver(iter([]), [cut], RATE)  # nothing made: still closed complete, no tail only
    assert cut.sink.complete is True


def test_a_wav_file_is_written_whole_and_only_when_complete(tmp_path):
    path = tmp_path / "jobs" / "a.wav"
    assert deliver([tone(0.5), tone(0.25)], [WavFileSink(path, "audio.file_dir")], RATE)
    with wave.open(str(path)) as wav:
        assert wav.getframerate() == RATE and wav.getnframes() == round(0.75 * RATE)
    cut = tmp_path / "jobs" / "b.wav"
    assert (
        deliver([tone(0.5)], [WavFileSink(cut, "audio.file_dir"), RecordingSink(1)], RATE) is False
    )
    assert not cut.exists()


def test_a_wav_file_that_cannot_be_written_names_its_setting(tmp_path):
    blocker = tmp_path / "taken"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(AudioDeviceError, match=r"^audio\.file_dir: cannot write"):
        deliver([tone(0.1)], [WavFileSink(blocker / "a.wav", "audio.file_dir")], RATE)
    with pytest.raises(FastvoiceError, match=r"^cannot write .*missing"):
        deliver([tone(0.1)], [WavFileSink(tmp_path / "missing" / "a.wav")], RATE)


def test_published_pcm_goes_out_in_numbered_chunks_and_ends_with_an_empty_one():
    sent: list[tuple[str, bytes]] = []
    sink = PublishSink(lambda topic, payload: sent.append((topic, payload)), "box/a", "pcm", 8000)
    assert deliver([tone(0.5), tone(0.5)], [sink], RATE)
    chunks = [decode_chunk(payload) for _, payload in sent]
    assert {topic for topic, _ in sent} == {"box/a"}
    assert [chunk.sequence for chunk in chunks] == list(range(len(chunks)))
    assert len(chunks[-1].samples) == 0 and all(len(c.samples) for c in chunks[:-1])
    assert {chunk.sample_rate for chunk in chunks} == {8000}
    assert abs(sum(len(c.samples) for c in chunks) - 8000) <= 2


def test_published_wav_is_one_message_at_the_end_and_none_when_cut_short():
    sent: list[bytes] = []
    sink = PublishSink(lambda _topic, payload: sent.append(payload), "box/a", "wav", None)
    assert deliver([tone(0.5)], [sink], RATE)
    with wave.open(io.BytesIO(sent[0])) as wav:
        assert wav.getframerate() == RATE and wav.getnframes() == RATE // 2
    sent.clear()
    assert deliver([tone(0.5)], [sink, RecordingSink(stop_after_blocks=1)], RATE) is False
    assert sent == []


def test_raw_pcm_goes_out_as_16_bit_samples_and_a_closed_pipe_ends_it(tmp_path):
    out = io.BytesIO()
    assert deliver([tone(0.25, 0.5)], [RawPcmSink(out)], RATE)
    samples = np.frombuffer(out.getvalue(), np.int16)
    assert len(samples) == RATE // 4 and abs(samples[0] - 0.5 * 32767) <= 1


# A lane with the tests' sink beside the config's outputs


def test_a_job_timed_to_an_instant_has_no_lead_in(synthesizer, tmp_path):
    import time

    at = int((time.time() + 3) * 1000)
    command = SayCommand(text="On the mark.", at=at)
    audio = {"device": "none", "lead_in_ms": 500, "file_dir": str(tmp_path)}
    recorder, _ = run_lane(synthesizer, command, audio)
    assert recorder.start_at == pytest.approx(at / 1000)
    assert np.flatnonzero(np.abs(recorder.audio) > 0.02)[0] < round(0.3 * EMBEDDED_RATE)


# Handed to an asyncio consumer (HTTP bodies, Wyoming connections)


def test_a_handoff_gives_the_blocks_in_order_and_keeps_only_a_few_ahead():
    made: list[int] = []

    def blocks():
        for number in range(20):
            made.append(number)
            yield tone(0.01, number / 100)

    async def consume() -> list[float]:
        with ThreadPoolExecutor(2) as pool:
            handoff = Handoff(blocks(), RATE, pool)
            read = []
            while (block := await handoff.next()) is not None:
                await asyncio.sleep(0.01)  # a slow client
                assert len(made) - len(read) <= 6  # the queue's depth, one in hand, one made
                read.append(float(block[0]))
            await handoff.close()
            return read

    assert asyncio.run(consume()) == pytest.approx([n / 100 for n in range(20)])


def test_a_failure_while_making_is_raised_after_the_blocks_before_it():
    def blocks():
        yield tone(0.01)
        raise FastvoiceError("the decoder failed")

    async def consume() -> int:
        with ThreadPoolExecutor(1) as pool:
            handoff = Handoff(blocks(), RATE, pool)
            read = 0
            with pytest.raises(FastvoiceError, match="the decoder failed"):
                while await handoff.next() is not None:
                    read += 1
            return read

    assert asyncio.run(consume()) == 1


def test_a_consumer_that_leaves_ends_the_making_on_its_thread():
    """A client that goes away: the generator is closed after the block being made (its
    `finally` runs: a render's admission place comes back), not left to the garbage collector."""
    ended = threading.Event()
    made: list[int] = []

    def blocks():
        try:
            for number in range(1000):
                made.append(number)
                yield tone(0.01)
        finally:
            ended.set()

    async def leave_early() -> None:
        with ThreadPoolExecutor(1) as pool:
            handoff = Handoff(blocks(), RATE, pool)
            await handoff.next()
            await handoff.close()
            assert ended.is_set()

    asyncio.run(leave_early())
    assert len(made) < 20
