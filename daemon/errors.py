"""Errors a user can act on. Each carries a message meant to be shown as is, no traceback."""


class FastvoiceError(Exception):
    """Base of every error the CLI and service turn into a message."""

    exit_code = 1


class ConfigError(FastvoiceError):
    """The configuration file (or an option) is invalid; the message names the key path."""

    exit_code = 2


class TextError(FastvoiceError):
    """The text to speak cannot be spoken (empty, too long, nothing speakable)."""

    exit_code = 2


class VoiceError(FastvoiceError):
    """A voice is unknown, missing files, or does not match its graph."""

    exit_code = 2


class VoiceInstallError(VoiceError):
    """A voice's files could not be fetched whole, or they do not make a working voice: a
    runtime failure (exit code 1), not a usage error."""

    exit_code = 1


class SoundError(FastvoiceError):
    """A chime or sound is unknown, unreadable or unsuitable (too long, too large)."""

    exit_code = 2


class BackendError(FastvoiceError):
    """A runtime backend is unavailable or failed to load or run a stage."""


class AudioDeviceError(FastvoiceError):
    """No usable output device, or the device failed while playing."""


def error_text(error: BaseException) -> str:
    """An exception as a message: its text, or its repr when it has none (KeyError(), ...)."""
    return str(error) or repr(error)


def reason_code(error: FastvoiceError) -> str:
    """The short machine-readable reason every interface reports for an error."""
    for kind, code in (
        (TextError, "bad_text"),
        (VoiceError, "bad_voice"),
        (SoundError, "bad_sound"),
        (AudioDeviceError, "audio_device"),
        (BackendError, "synthesis"),
    ):
        if isinstance(error, kind):
            return code
    return "error"


class GpuOutOfMemory(BackendError):
    """A run could not get the device memory it needed."""
