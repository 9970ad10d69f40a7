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


# The one mapping of a reason (the `reason` of MQTT's and the local socket's `rejected` and
# `failed` events, of Hermes' job events, of HTTP's error body; OpenAI's error `code`; Wyoming's
# `error` code) to what every other interface answers: the HTTP status and the exit code of
# `fastvoice say`. What a request asks for that cannot be spoken is the client's to fix (4xx,
# exit 2: the same request fails again); a full queue is the same request taken later (503);
# any other reason is the box's failure, not the request's (500, exit 1).
REASONS: dict[str, tuple[int, int]] = {
    "invalid": (400, 2),  # not a request: unreadable, unknown or wrong fields
    "bad_text": (400, 2),  # empty, too long, malformed SSML, nothing speakable
    "bad_voice": (400, 2),  # unknown voice or speaker, no voice of the language asked for
    "bad_sound": (400, 2),  # unknown or unsuitable chime or sound
    "duplicate": (409, 2),  # the id was accepted already
    "queue_full": (503, 2),  # busy: the queue holds queue.max_jobs jobs
}


def http_status(reason: str) -> int:
    """The HTTP status of a reason (500: the box's failure)."""
    return REASONS.get(reason, (500, 1))[0]


def exit_code(reason: str) -> int:
    """The exit code of `fastvoice say` for a job refused or failed for a reason."""
    return REASONS.get(reason, (500, 1))[1]


class RefusedJob(FastvoiceError):
    """A job the service refused or could not speak, as its event says: its exit code is its
    reason's (2 for what the request asked, 1 for the box's failure)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.exit_code = exit_code(reason)


class GpuOutOfMemory(BackendError):
    """A run could not get the device memory it needed."""
