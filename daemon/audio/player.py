"""Local playback: a sounddevice callback stream fed from a bounded buffer.

The callback only copies from the buffer, so synthesis of the next sentence runs while this one
plays; `stop()` empties the buffer and ends playback at the next callback. When the device
cannot open the voice's rate (or `audio.sample_rate` asks for another), soxr resamples. With
`audio.keep_awake_s` the stream stays open after a job (silence, or an inaudible tone), so an
amplifier that sleeps between announcements stays awake and the next job starts at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from daemon.config.audio import NO_DEVICE
from daemon.errors import AudioDeviceError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from daemon.config import AudioConfig

NO_DEVICE_HINT = "write a file instead with -o out.wav"
# The service's advice: its jobs come over MQTT, HTTP or Wyoming, where `-o` means nothing.
SERVICE_NO_DEVICE_HINT = (
    "set audio.device: none and audio.file_dir to write each job as a WAV file, or send jobs "
    "with output: publish and a reply_topic"
)


def sounddevice_module():
    """sounddevice, or AudioDeviceError when its PortAudio library is missing."""
    try:
        import sounddevice
    except OSError as error:
        raise AudioDeviceError(
            f"the PortAudio library is missing ({error}); "
            f"install libportaudio2, or {NO_DEVICE_HINT}"
        ) from None
    return sounddevice


def output_devices() -> list[dict[str, Any]]:
    """Output-capable devices as sounddevice describes them (index, name, default rate)."""
    sd = sounddevice_module()
    return [
        {"index": d["index"], "name": d["name"], "default_samplerate": d["default_samplerate"]}
        for d in sd.query_devices()
        if d["max_output_channels"] > 0
    ]


def _describe_devices() -> str:
    names = [f"{d['index']}: {d['name']}" for d in output_devices()]
    return "; ".join(names) if names else "none"


@dataclass(frozen=True)
class OutputTarget:
    device: int
    name: str
    sample_rate: int


def resolve_output(
    device: str | int | None, sample_rate: int, hint: str = NO_DEVICE_HINT
) -> OutputTarget:
    """The device to open and the rate it will run at; AudioDeviceError if there is none (with
    `hint`, the advice that fits where the job came from)."""
    sd = sounddevice_module()
    try:
        info = sd.query_devices(device, "output")
    except (ValueError, sd.PortAudioError) as error:
        if device is None:
            raise AudioDeviceError(f"no audio output device found; {hint}") from None
        raise AudioDeviceError(
            f"audio device {device!r} is not usable ({error}); output devices: "
            f"{_describe_devices()}; or {hint}"
        ) from None
    try:
        sd.check_output_settings(info["index"], channels=1, dtype="float32", samplerate=sample_rate)
        rate = sample_rate
    except sd.PortAudioError:
        rate = int(info["default_samplerate"])
    return OutputTarget(device=info["index"], name=info["name"], sample_rate=rate)


def play_silence(device: str | int | None, sample_rate: int) -> OutputTarget:
    """Opens the device and plays a tenth of a second of silence (`fastvoice doctor`)."""
    import numpy as np

    target = resolve_output(device, sample_rate)
    sd = sounddevice_module()
    silence = np.zeros(target.sample_rate // 10, dtype=np.float32)
    sd.play(silence, samplerate=target.sample_rate, device=target.device, blocking=True)
    return target


class _BoundedBuffer:
    """Float32 samples between the producer and the audio callback, at most `capacity` held.

    Nothing is handed out until `prefill` frames are held (or the producer is done), so playback
    does not begin with an underrun gap.
    """

    def __init__(self, capacity: int, prefill: int) -> None:
        self.capacity = capacity
        self.prefill = min(prefill, capacity)
        self._blocks: deque[np.ndarray] = deque()
        self._held = 0
        self._closed = False
        self._primed = False
        self._cond = threading.Condition()

    def put(self, block: np.ndarray) -> bool:
        """Blocks while full. False once the buffer was cleared by a stop."""
        with self._cond:
            while self._held >= self.capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._blocks.append(block)
            self._held += len(block)
            return True

    def take_into(self, out: np.ndarray) -> int:
        """Fills `out` from the front; returns the frames written. Never waits."""
        written = 0
        with self._cond:
            self._primed = self._primed or self._closed or self._held >= self.prefill
            while self._primed and written < len(out) and self._blocks:
                block = self._blocks[0]
                count = min(len(block), len(out) - written)
                out[written : written + count] = block[:count]
                written += count
                if count == len(block):
                    self._blocks.popleft()
                else:
                    self._blocks[0] = block[count:]
            self._held -= written
            self._cond.notify_all()
        return written

    def close(self, discard: bool) -> None:
        with self._cond:
            self._closed = True
            if discard:
                self._blocks.clear()
                self._held = 0
            self._cond.notify_all()

    @property
    def drained(self) -> bool:
        with self._cond:
            return self._closed and not self._blocks


def announce_media_role(role: str) -> None:
    """Streams opened from now on carry `media.role` (libpulse reads PULSE_PROP when PortAudio's
    ALSA pulse device, or PipeWire's pulse server, connects), so the sound server's
    role-ducking (PulseAudio's module-role-ducking, WirePlumber's policies) lowers music while
    fastvoice speaks. A role the environment already sets is kept."""
    properties = os.environ.get("PULSE_PROP", "")
    if "media.role" not in properties:
        os.environ["PULSE_PROP"] = f"{properties} media.role={role}".strip()


class Player:
    """Plays one job at a time on the configured device (see `Playback`); the stream may stay
    open between jobs (`keep_awake_s`)."""

    def __init__(
        self,
        device: str | int | None = None,
        volume: float = 1.0,
        output_rate: int | None = None,
        buffer_s: float = 2.0,
        prefill_s: float = 0.1,
        blocksize: int = 1024,
        hint: str = NO_DEVICE_HINT,
    ) -> None:
        self.device = device
        self.hint = hint
        self.volume = volume
        self.paused = False
        self.output_rate = output_rate
        self.buffer_s = buffer_s
        self.prefill_s = prefill_s
        self.blocksize = blocksize
        # A timed start opens the stream this long before its instant: opening one through
        # PortAudio and a sound server took up to a second here, and a stream that comes up
        # after the instant starts late.
        self.head_start_s = 2.5
        self.open_s = 0.05  # the least time to open a stream and place the instant in it
        self.keep_awake_s = 0.0
        self.keep_awake_tone_dbfs: float | None = None
        self._buffer: _BoundedBuffer | None = None
        self._stopped = threading.Event()
        self._held: _OpenOutput | None = None  # a stream kept open after its job
        self._held_lock = threading.Lock()

    @classmethod
    def from_config(
        cls, audio: AudioConfig, device: str | int | None = None, hint: str = NO_DEVICE_HINT
    ) -> Player:
        """The player of the `audio` settings (`device`, when given, instead of theirs)."""
        if audio.media_role is not None:
            announce_media_role(audio.media_role)
        player = cls(volume=audio.volume, hint=hint)
        player.apply(audio)
        if device is not None:
            player.device = device
        return player

    def apply(self, audio: AudioConfig) -> None:
        """Takes the output settings of `audio` (not the volume, which is also set at run time):
        the next utterance plays with them."""
        self.device = audio.device
        self.output_rate = audio.sample_rate
        self.prefill_s = audio.prefill_s
        self.buffer_s = max(2.0, audio.prefill_s)  # room for the whole prefill, and some
        self.keep_awake_s = audio.keep_awake_s
        self.keep_awake_tone_dbfs = audio.keep_awake_tone_dbfs
        self.release()  # a stream held open under the old settings is not reused

    def describe(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "volume": self.volume,
            "sample_rate": self.output_rate,
            "prefill_s": self.prefill_s,
            "keep_awake_s": self.keep_awake_s,
            "held_open": self._held is not None,
        }

    def target(self, sample_rate: int) -> OutputTarget:
        if self.device == NO_DEVICE:
            return OutputTarget(device=-1, name="none", sample_rate=0)
        return resolve_output(self.device, self.output_rate or sample_rate, self.hint)

    def play(
        self, blocks: Iterable[np.ndarray], sample_rate: int, start_at: float | None = None
    ) -> bool:
        """Plays float32 mono blocks until they end; False if `stop()` cut it short. With
        `start_at` (unix time), the first sample leaves the device then."""
        playback = self.open(sample_rate, start_at)
        complete = False
        try:
            complete = all(playback.write(block) for block in blocks)
        finally:
            played = playback.close(complete)
        return played

    def open(self, sample_rate: int, start_at: float | None = None) -> Playback:
        """A playback to write blocks into as they are made (see `Playback`); with `start_at`,
        this waits until `head_start_s` before it."""
        self._stopped.clear()
        playback = Playback(self, sample_rate, start_at)
        if start_at is not None:
            self._stopped.wait(max(0.0, start_at - self.head_start_s - time.time()))
        return playback

    def _take_held(self, sample_rate: int) -> _OpenOutput | None:
        """The stream held open since the last job when it was opened for this device and
        rate (the others are closed)."""
        with self._held_lock:
            held, self._held = self._held, None
        if held is None:
            return None
        if held.asked == self._asked(sample_rate) and not held.feed.dead:
            return held
        held.close()
        return None

    def _asked(self, sample_rate: int) -> tuple[str | int | None, int]:
        """The device and rate the settings ask for a voice of `sample_rate`."""
        return self.device, self.output_rate or sample_rate

    def _open_output(self, sd, target: OutputTarget, sample_rate: int) -> _OpenOutput:
        feed = _DeviceFeed(self, target.sample_rate, sd.CallbackStop)
        stream = self._open_stream(sd, target, feed)
        output = _OpenOutput(stream, feed, target, self._asked(sample_rate))
        output.stream.start()
        return output

    def _give_back(self, output: _OpenOutput) -> None:
        """Keeps the stream open for `keep_awake_s` (released by a timer), or closes it."""
        if self.keep_awake_s <= 0 or output.feed.dead:
            output.close()
            return
        timer = threading.Timer(self.keep_awake_s, self._release_if_idle, [output])
        timer.daemon = True
        with self._held_lock:
            self._held = output
        timer.start()

    def _release_if_idle(self, output: _OpenOutput) -> None:
        with self._held_lock:
            if self._held is not output:
                return  # a job took it since
            self._held = None
        output.close()

    def release(self) -> None:
        """Closes the stream held open after the last job (a settings change, the service's
        stop)."""
        with self._held_lock:
            held, self._held = self._held, None
        if held is not None:
            held.close()

    def _open_stream(self, sd, target: OutputTarget, feed: _DeviceFeed):
        try:
            return sd.OutputStream(
                samplerate=target.sample_rate,
                device=target.device,
                channels=1,
                dtype="float32",
                blocksize=self.blocksize,
                latency="high",
                callback=feed.callback,
                finished_callback=feed.finished,
            )
        except sd.PortAudioError as error:
            raise AudioDeviceError(
                f"cannot open audio device {target.name!r} at {target.sample_rate} Hz: {error}; "
                f"or {self.hint}"
            ) from None

    def stop(self) -> None:
        """Ends the current playback now, dropping what was buffered (and its file)."""
        self._stopped.set()
        buffer = self._buffer
        if buffer is not None:
            buffer.close(discard=True)


class Playback:
    """One job's audio on its way to the device, written as it is made. The device opens at
    the first block written (a running stream's callback, silence until the prefill is there,
    would compete with the voice for the cores), or a stream held open since the last job is
    taken;
    the stream opens `head_start_s` before a start instant and plays silence up to the sample
    the instant falls on, placed by PortAudio's time of each buffer at the converter."""

    def __init__(self, player: Player, sample_rate: int, start_at: float | None) -> None:
        self.player = player
        self.sample_rate = sample_rate
        self.start_at = start_at
        self._output: _OpenOutput | None = None
        self._buffer: _BoundedBuffer | None = None
        self._resampler: Any = None

    @property
    def stopped(self) -> bool:
        return self.player._stopped.is_set()

    def write(self, block: np.ndarray) -> bool:
        """Queues `block` for the device (waiting while its buffer is full); False once
        `Player.stop()` cut the playback short."""
        if self.stopped:
            return False
        if self.player.device == NO_DEVICE:
            return True
        if self._buffer is None:
            self._start()
        assert self._buffer is not None
        if self._resampler is not None:
            block = self._resampler.resample_chunk(block)
        if block.size and not self._buffer.put(np.ascontiguousarray(block, dtype=np.float32)):
            if not self.stopped:  # not a stop: the stream ended under it
                self._device_lost()
            return False
        return not self.stopped

    def _start(self) -> None:
        player = self.player
        held = player._take_held(self.sample_rate)
        try:
            # A held stream's device is not probed again: opening it to ask would fail on a
            # device that takes one stream at a time.
            target = held.target if held is not None else player.target(self.sample_rate)
            if target.sample_rate != self.sample_rate:
                import soxr

                self._resampler = soxr.ResampleStream(
                    self.sample_rate, target.sample_rate, 1, dtype="float32"
                )
            capacity, prefill = (
                target.sample_rate * player.buffer_s,
                target.sample_rate * player.prefill_s,
            )
            self._buffer = player._buffer = _BoundedBuffer(int(capacity), int(prefill))
            self._output = held or player._open_output(
                sounddevice_module(), target, self.sample_rate
            )
        except BaseException:
            if self._buffer is not None:
                self._buffer.close(discard=True)
            player._buffer = None
            if held is not None:
                held.close()
            raise
        self._output.feed.begin(self._buffer, self.start_at, hold=player.keep_awake_s > 0)

    def _device_lost(self) -> None:
        """The device went away mid-job (unplugged, its sound server gone): the job fails,
        naming it."""
        name = self._output.target.name if self._output is not None else "?"
        raise AudioDeviceError(
            f"audio device {name!r} stopped in the middle of playback "
            "(unplugged, or its sound server went away)"
        )

    def close(self, complete: bool) -> bool:
        """Plays what was written to its end (`complete`), or drops it (a failure upstream);
        True when it was all played, False when a stop cut it short."""
        buffer, output = self._buffer, self._output
        if buffer is None or output is None:
            return complete and not self.stopped
        feed = output.feed
        try:
            if complete and self._resampler is not None and not self.stopped:
                buffer.put(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True))
            buffer.close(discard=self.stopped or not complete)
            feed.done.wait()
        finally:
            buffer.close(discard=True)  # after a failure, frees the callback
            self.player._buffer = None
            self.player._give_back(output)
        if feed.late_by is not None:
            log.warning(
                "the audio stream came up %.0f ms after the start instant", feed.late_by * 1e3
            )
        if complete and not feed.drained.is_set() and not self.stopped:
            self._device_lost()
        return complete and not self.stopped


@dataclass
class _OpenOutput:
    """A started PortAudio stream, the feed its callback reads, and what it was opened for
    (the device the config names and the rate, before the device had its say)."""

    stream: Any
    feed: _DeviceFeed
    target: OutputTarget
    asked: tuple[str | int | None, int]  # the device and rate it was opened for

    def close(self) -> None:
        self.stream.stop()
        self.stream.close()


KEEP_AWAKE_TONE_HZ = 20.0  # below what a listener hears, still a signal to an amplifier


class _DeviceFeed:
    """PortAudio's side of a stream: its callback fills each device buffer from the job's
    bounded buffer (silence while paused, and up to the sample a start instant falls on, placed
    by PortAudio's time of each buffer at the converter), at the player's volume. Between jobs
    on a stream held open, it plays the keep-awake signal."""

    def __init__(self, player: Player, sample_rate: int, callback_stop: type[Exception]) -> None:
        self.player = player
        self.sample_rate = sample_rate
        self.callback_stop = callback_stop
        self.buffer: _BoundedBuffer | None = None  # the job playing; None between jobs
        self.start_at: float | None = None  # None once the buffer it falls in was found
        self.hold = False  # after the job, the stream stays open
        self.done = threading.Event()
        self.drained = threading.Event()  # the job ended because all was played
        self.late_by: float | None = None  # the stream came up after the instant: by how much
        self.dead = False  # the stream ended (its job stopped it, or the device went away)
        self._tone_at = 0  # the keep-awake tone's phase, in samples

    def begin(self, buffer: _BoundedBuffer, start_at: float | None, hold: bool) -> None:
        """The next job: the callback reads `buffer` from its next call."""
        self.start_at, self.hold, self.late_by = start_at, hold, None
        self.done, self.drained = threading.Event(), threading.Event()
        self.buffer = buffer

    def finished(self) -> None:
        # Also called when the device dies (unplugged, its sound server gone): then the
        # producer must not wait on a buffer nobody reads any more.
        self.dead = True
        self.done.set()
        if self.buffer is not None:
            self.buffer.close(discard=not self.drained.is_set())

    def _idle(self, out: np.ndarray) -> None:
        """Silence, or the keep-awake tone at its level."""
        level = self.player.keep_awake_tone_dbfs
        if level is None:
            out.fill(0.0)
            return
        at = self._tone_at + np.arange(len(out))
        out[:] = 10 ** (level / 20) * np.sin(2 * np.pi * KEEP_AWAKE_TONE_HZ / self.sample_rate * at)
        self._tone_at = (self._tone_at + len(out)) % self.sample_rate

    def callback(self, outdata, frames, times, _status) -> None:
        mono = outdata[:, 0]
        buffer = self.buffer
        if buffer is None:
            self._idle(mono)
            return
        if self.player.paused:
            mono.fill(0.0)
            return
        if self.start_at is not None:
            # The stream's clock and the wall clock read together: the instant on the
            # former, against when this buffer reaches the converter.
            instant = self.start_at - time.time() + times.currentTime
            at_converter = times.outputBufferDacTime or times.currentTime
            silent = round((instant - at_converter) * self.sample_rate)
            if silent >= frames:
                self._idle(mono)
                return
            self.start_at = None
            if silent < 0:
                self.late_by = -silent / self.sample_rate
            self._idle(mono[: max(0, silent)])
            mono = mono[max(0, silent) :]
            frames -= max(0, silent)
        written = buffer.take_into(mono)
        mono[written:] = 0.0
        if self.player.volume != 1.0:
            mono[:written] *= self.player.volume
        if written < frames and buffer.drained:
            self.drained.set()
            if not self.hold:
                raise self.callback_stop
            self.buffer = None
            self._idle(mono[written:])
            self.done.set()
