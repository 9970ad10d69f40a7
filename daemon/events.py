"""The job events every interface reports (MQTT, the local socket): standard library only, so
that the light client of `fastvoice say` can read them too."""

# Events after which a job is gone (unless one carries `will_resume`: it is queued again).
ENDS = ("finished", "failed", "interrupted", "rejected")
