"""Audio sent back over MQTT: PCM chunks as they are made (docs/mqtt.md's framing, an empty
chunk at the end), or one message in a whole format (WAV, FLAC, MP3, Opus) when the job ends."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import soxr

from daemon.audio.encoding import encoded
from daemon.audio.pcm_stream import encode_chunk

Publish = Callable[[str, bytes], None]  # publish(topic, payload)


class PublishSink:
    """To `topic` in `form`, at `sent_rate` (resampled from the audio's own)."""

    lead_s = 0.0
    opening_s = 0.0

    def __init__(self, publish: Publish, topic: str, form: str, sent_rate: int | None) -> None:
        self.publish = publish
        self.topic = topic
        self.form = form
        self.sent_rate = sent_rate
        self._rate = 0
        self._kept: list[np.ndarray] = []
        self._resampler: soxr.ResampleStream | None = None
        self._sequence = 0

    def open(self, rate: int, start_at: float | None) -> None:
        self._rate, self._kept, self._sequence = rate, [], 0
        self.sent_rate = self.sent_rate or rate
        self._resampler = None
        if self.form == "pcm" and self.sent_rate != rate:
            self._resampler = soxr.ResampleStream(rate, self.sent_rate, 1, dtype="float32")

    def write(self, block: np.ndarray) -> bool:
        if self.form != "pcm":
            self._kept.append(block)
            return True
        sent = block if self._resampler is None else self._resampler.resample_chunk(block)
        if sent.size:  # an empty chunk would tell the listener the stream has ended
            self._send(sent)
        return True

    def close(self, complete: bool) -> bool:
        if not complete:
            return False
        assert self.sent_rate is not None
        if self.form == "pcm":
            if self._resampler is not None:
                last = self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)
                if last.size:
                    self._send(last)
            self._send(np.zeros(0, np.float32))
            return True
        audio = np.concatenate([np.zeros(0, np.float32), *self._kept])
        if self.sent_rate != self._rate:
            audio = soxr.resample(audio, self._rate, self.sent_rate)
        self.publish(self.topic, encoded(audio, self.sent_rate, self.form))
        return True

    def _send(self, samples: np.ndarray) -> None:
        assert self.sent_rate is not None
        self.publish(self.topic, encode_chunk(samples, self.sent_rate, self._sequence))
        self._sequence += 1
