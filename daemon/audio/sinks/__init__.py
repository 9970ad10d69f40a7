"""Where a job's audio goes: one protocol (`Sink`) and one module per kind of output. A new
output (a Snapcast group, AirPlay) is a module here and its config model; the service chooses
a job's sinks in one place (`daemon.service.outputs`)."""

from daemon.audio.sinks.base import Sink, deliver
from daemon.audio.sinks.device import DeviceSink
from daemon.audio.sinks.files import RawPcmSink, WavFileSink
from daemon.audio.sinks.padding import Padded
from daemon.audio.sinks.publish import Publish, PublishSink

__all__ = [
    "DeviceSink",
    "Padded",
    "Publish",
    "PublishSink",
    "RawPcmSink",
    "Sink",
    "WavFileSink",
    "deliver",
]
