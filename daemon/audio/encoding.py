"""Audio in the form a listener asked for: at another sample rate (soxr, as it comes) and in an
encoded format (WAV; FLAC, MP3 and Opus through libsndfile, which soundfile ships). Shared by
every interface that sends audio back (HTTP, the OpenAI route, MQTT's published audio)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np

from daemon.audio.pcm import to_int16
from daemon.audio.wav import wav_bytes
from daemon.errors import FastvoiceError

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/L16",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
# libsndfile's container and codec of each encoded format; Opus takes only these rates.
ENCODED = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


class EncodingError(FastvoiceError):
    """This box's libsndfile cannot write the format (too old, or built without it)."""


def resampled(blocks: Iterator[np.ndarray], rate: int, output_rate: int) -> Iterator[np.ndarray]:
    """The blocks at `output_rate`, resampled as they come (soxr's streaming resampler); a
    generator closed early closes `blocks` too (a client that left: the synthesis stops)."""
    import soxr

    resampler = soxr.ResampleStream(rate, output_rate, 1, dtype="float32")
    try:
        for block in blocks:
            yield resampler.resample_chunk(block)
        yield resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()


def encoded(audio: np.ndarray, rate: int, form: str) -> bytes:
    """The whole audio in `form` (pcm: raw 16-bit samples); raises EncodingError where this
    box cannot write it."""
    if form == "pcm":
        return to_int16(audio).tobytes()
    if form == "wav":
        return wav_bytes([audio], rate)
    import soundfile

    container, codec = ENCODED[form]
    if form == "opus" and rate not in OPUS_RATES:
        import soxr

        audio, rate = soxr.resample(audio, rate, 48000), 48000
    buffer = io.BytesIO()
    try:
        soundfile.write(buffer, audio, rate, format=container, subtype=codec)
    except (RuntimeError, ValueError, TypeError) as error:
        raise EncodingError(f"{form}: this box cannot encode it ({error})") from None
    return buffer.getvalue()
