"""The job events every interface reports (MQTT, the local socket): standard library only, so
that the light client of `fastvoice say` can read them too."""

from dataclasses import dataclass

# Events after which a job is gone (unless one carries `will_resume`: it is queued again).
ENDS = ("finished", "failed", "interrupted", "rejected")


@dataclass(frozen=True)
class Refusal:
    """Why a job was not accepted, as its `rejected` event says: the reason (`bad_text`,
    `bad_voice`, `bad_sound`, `duplicate`, `queue_full`: daemon.errors.REASONS) an interface
    answers by (HTTP's status, the CLI's exit code), and the message."""

    reason: str
    message: str

    def __str__(self) -> str:
        return self.message
