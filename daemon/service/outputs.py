"""The sinks a job's audio goes to, chosen in one place from the job and the config in force:
the box's device, `audio.file_dir`'s WAV files and what the service was given besides (played,
each padded by `audio.lead_in_ms` and `audio.tail_ms`), and MQTT for `output: publish`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from daemon.audio.player import Player
from daemon.audio.sinks import DeviceSink, Padded, Publish, PublishSink, Sink, WavFileSink
from daemon.config.audio import NO_DEVICE
from daemon.service.jobs import Job
from daemon.service.settings import Settings

# A played output of the service's own besides the config's (a job → its sink for that job).
SinkFactory = Callable[[Job], Sink]


class JobOutputs:
    def __init__(
        self,
        settings: Settings,
        player: Player,
        publish: Publish,
        extra_played: Sequence[SinkFactory] = (),
    ) -> None:
        """`extra_played`: played outputs besides the config's (the tests' recording sink)."""
        self.settings = settings
        self.player = player
        self.publish = publish
        self.extra_played = list(extra_played)

    def played(self, job: Job) -> list[Sink]:
        """Where a job that plays is heard. No lead-in before a job timed to start at an
        instant (`at`): it would make the box late."""
        if job.command.output == "publish":
            return []
        audio = self.settings.config.audio
        lead_s = 0.0 if job.command.at is not None else audio.lead_in_ms / 1000
        sinks: list[Sink] = []
        if self.player.device != NO_DEVICE:
            sinks.append(DeviceSink(self.player))
        if audio.file_dir is not None:
            sinks.append(WavFileSink(audio.file_dir / f"{job.id}.wav", "audio.file_dir"))
        sinks += [make(job) for make in self.extra_played]
        return [Padded(sink, lead_s, audio.tail_ms / 1000) for sink in sinks]

    def published(self, job: Job) -> list[Sink]:
        """MQTT for a job that publishes, in its format and rate, else the config's
        (`mqtt.publish_format`, `mqtt.publish_sample_rate`), else WAV at the voice's rate."""
        command = job.command
        if command.output == "play":
            return []
        assert command.reply_topic is not None
        mqtt = self.settings.config.mqtt
        form = command.format or mqtt.publish_format
        rate = command.sample_rate or mqtt.publish_sample_rate
        return [PublishSink(self.publish, command.reply_topic, form, rate)]

    def stop_playing(self) -> None:
        """Cuts short what the device plays (its sink's next write says so)."""
        self.player.stop()
