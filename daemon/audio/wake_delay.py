"""How late an output wakes: a rising sweep played from the first sample of a fresh stream,
heard back through a loop-back (the amplifier's output into a line or microphone input).

The sweep's frequency says when in it each moment was played, so the first moment heard names
what the output swallowed, whatever the latency of the loop: no clock is shared between the two
streams.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from daemon.audio.player import resolve_output, sounddevice_module
from daemon.errors import AudioDeviceError

SWEEP_S = 3.0  # longer than any amplifier we know of takes to wake
SWEEP_FROM_HZ, SWEEP_TO_HZ = 300.0, 3300.0
SWEEP_LEVEL = 0.3
AFTER_S = 0.5  # recorded past the sweep's end: the loop's latency
FRAME_S = 0.02
MARGIN_MS = 100  # added to the measured delay for the lead-in advised
LEAST_HEARD_S = 0.5  # less of the sweep than this heard: not a loop-back


def sweep(rate: int) -> np.ndarray:
    """SWEEP_S of a linear sweep from SWEEP_FROM_HZ to SWEEP_TO_HZ, starting at full level."""
    t = np.arange(round(SWEEP_S * rate)) / rate
    slope = (SWEEP_TO_HZ - SWEEP_FROM_HZ) / SWEEP_S
    phase = 2 * np.pi * (SWEEP_FROM_HZ * t + slope * t * t / 2)
    return (SWEEP_LEVEL * np.sin(phase)).astype(np.float32)


@dataclass(frozen=True)
class WakeDelay:
    swallowed_ms: int  # how much of the stream's start the output did not play
    latency_ms: int  # from the stream's sample to the input's, through the loop
    lead_in_ms: int  # the `audio.lead_in_ms` advised: the delay and a margin, 0 when none

    @classmethod
    def of(cls, swallowed_s: float, latency_s: float) -> WakeDelay:
        swallowed_ms = max(0, round(swallowed_s * 1000))
        lead_in = 0 if swallowed_ms < 1000 * FRAME_S else swallowed_ms + MARGIN_MS
        return cls(swallowed_ms, round(latency_s * 1000), math.ceil(lead_in / 50) * 50)


def heard_from(recording: np.ndarray, rate: int) -> WakeDelay:
    """The wake delay a recording of the sweep shows. Each frame loud enough (within 10 dB of
    the recording's steady level) names the moment of the sweep it holds by its strongest
    frequency; their offsets give the loop's latency, and the first of them what was
    swallowed. AudioDeviceError when the sweep is not in the recording."""
    frame = round(FRAME_S * rate)
    count = len(recording) // frame
    frames = recording[: count * frame].reshape(count, frame).astype(np.float64)
    levels = np.sqrt(np.mean(frames**2, axis=1))
    steady = np.percentile(levels, 90) if count else 0.0
    loud = np.flatnonzero(levels >= steady * 10 ** (-10 / 20)) if steady > 1e-4 else []
    spectrum = np.abs(np.fft.rfft(frames[loud] * np.hanning(frame), n=4 * frame))
    strongest = np.argmax(spectrum, axis=1) * rate / (4 * frame)
    slope = (SWEEP_TO_HZ - SWEEP_FROM_HZ) / SWEEP_S
    in_sweep = (strongest >= SWEEP_FROM_HZ) & (strongest <= SWEEP_TO_HZ)
    moments = (strongest[in_sweep] - SWEEP_FROM_HZ) / slope  # into the sweep, played
    at = (np.asarray(loud)[in_sweep] + 0.5) * FRAME_S  # into the recording, heard
    latency = float(np.median(at - moments)) if len(at) else 0.0
    # Frames of the sweep agree on the latency; noise or another sound does not.
    agreeing = np.abs(at - moments - latency) <= 2 * FRAME_S
    if np.count_nonzero(agreeing) * FRAME_S < LEAST_HEARD_S or agreeing.mean() < 0.8:
        raise AudioDeviceError(
            "the sweep was not heard on the input: is the loop-back connected (the "
            "amplifier's output into the input), and the output's volume up?"
        )
    return WakeDelay.of(float(at[agreeing][0] - latency - FRAME_S / 2), latency)


def measure(output: str | int | None, input_device: str | int | None) -> WakeDelay:
    """Plays the sweep on a freshly opened `output` stream while `input_device` records."""
    sd = sounddevice_module()
    target = resolve_output(output, 22050)
    rate = target.sample_rate
    try:
        sd.check_input_settings(input_device, channels=1, dtype="float32", samplerate=rate)
    except (ValueError, sd.PortAudioError) as error:
        raise AudioDeviceError(f"input device {input_device!r} is not usable: {error}") from None
    heard: list[np.ndarray] = []
    enough = threading.Event()
    wanted = round((SWEEP_S + AFTER_S) * rate)

    def record(indata, _frames, _times, _status) -> None:
        heard.append(indata[:, 0].copy())
        if sum(len(block) for block in heard) >= wanted:
            enough.set()

    with sd.InputStream(
        samplerate=rate, device=input_device, channels=1, dtype="float32", callback=record
    ):
        sd.play(sweep(rate), samplerate=rate, device=target.device, blocking=True)
        if not enough.wait(AFTER_S + 2 * SWEEP_S):
            raise AudioDeviceError(f"input device {input_device!r} stopped recording")
    return heard_from(np.concatenate(heard)[:wanted], rate)
