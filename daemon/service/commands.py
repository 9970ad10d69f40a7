"""The commands the service takes (say, stop, volume, pause, voice), as every interface writes
them (JSON: MQTT, HTTP, the local socket, the render queue): bytes → a validated command, or an
error naming the problem. Transport-neutral: nothing here touches the queue or the broker."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from daemon.validation import format_validation_error

PAYLOAD_VERSION = 1
Priority = Literal["low", "normal", "high", "critical"]
PRIORITY_RANK: dict[str, int] = {"critical": 0, "high": 1, "normal": 2, "low": 3}
ModelT = TypeVar("ModelT", bound=BaseModel)
JobId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")]


class CommandError(ValueError):
    """A payload that cannot be accepted; the message is sent back in a `rejected` event."""

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class UnreadablePayload(CommandError):
    """A payload that is not in the form a command is written in at all (not UTF-8 text, not
    JSON, not a JSON object), where others have the form but wrong fields (HTTP: 400, 422)."""


# What a JSON value that is not an object is, in JSON's words.
_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _plain_topic(value: str | None) -> str | None:
    if value is not None and (
        not value or any(c in value for c in "#+\0") or value.startswith("$")
    ):
        raise ValueError(f"{value!r} is not a plain topic (no wildcards, not a $ topic)")
    return value


# A language as requests name it: ja, en_US, de-DE.
LanguageTag = Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})?$")]


class SayCommand(BaseModel):
    """The `say` payload, version 1 (docs/mqtt.md, docs/say.schema.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = Field(PAYLOAD_VERSION, description="payload version")
    id: JobId = Field(
        default_factory=lambda: uuid.uuid4().hex[:12],
        description="job id, echoed in every event; a repeated id is never spoken twice",
    )
    text: str = Field(description="what to say (empty: refused as bad_text, as on every interface)")
    voice: str | None = Field(None, description="voice name; default: the configured voice")
    language: LanguageTag | None = Field(
        None,
        description="language tag (ja, en_US, de-DE): without a voice, a voice of that "
        "language (the configured one if it speaks it)",
    )
    speaker: Annotated[str, Field(max_length=64)] | Annotated[int, Field(ge=0)] | None = Field(
        None, description="speaker name or index of a multi-speaker voice"
    )
    priority: Priority = Field(
        "normal", description="queue order; critical interrupts what is playing"
    )
    chime: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")] | None = Field(
        None,
        description="sound before the speech: dingdong, attention, alarm, a file's name in "
        "sounds.dir, or none; default: the config's sounds.chime_by_priority",
    )
    volume: float | None = Field(None, ge=0.0, le=1.0, description="this job's volume, 0 to 1")
    rate: float = Field(
        1.0,
        ge=0.25,
        le=4.0,
        description="speaking rate: 2 is twice as fast, 0.5 half as fast (0.25 to 4, OpenAI's "
        "`speed`)",
    )
    sentence_pause_s: float | None = Field(
        None,
        ge=0.0,
        le=5.0,
        description="silence between sentences; default: the config's audio.sentence_pause_s",
    )
    output: Literal["play", "publish", "both"] = Field(
        "play", description="play on the box, publish to reply_topic, or both"
    )
    reply_topic: str | None = Field(
        None, max_length=256, description="where published audio goes (no wildcards)"
    )
    format: Literal["wav", "pcm", "flac", "mp3", "opus"] | None = Field(
        None,
        description="published audio: PCM chunks as they are made (docs/mqtt.md), or one "
        "message of WAV, FLAC, MP3 or Opus (Ogg); default: mqtt.publish_format (wav)",
    )
    sample_rate: int | None = Field(
        None,
        ge=8000,
        le=48000,
        description="published audio at this rate (resampled); default: "
        "mqtt.publish_sample_rate, else the voice's own",
    )
    expires_s: float | None = Field(
        None, gt=0, le=86_400, description="drop the job if it has not started this long after"
    )
    at: int | None = Field(
        None,
        gt=0,
        description="unix time in milliseconds when the first sample leaves the speaker: "
        "boxes given the same `at` start together",
    )
    sync: bool = Field(
        False,
        description="without `at`: start queue.sync_lead_s after the box received it",
    )
    captions: bool = Field(
        False,
        description="a `words` event per sentence before it is heard: its words with their "
        "start and end in ms from the first sample the job plays (audio.lead_in_ms and the "
        "chime included)",
    )

    _topic = field_validator("reply_topic")(_plain_topic)

    @model_validator(mode="after")
    def _reply_topic_for_publish(self) -> SayCommand:
        if self.output != "play" and self.reply_topic is None:
            raise ValueError(f"output {self.output!r} needs a reply_topic")
        if self.output == "publish" and (self.at is not None or self.sync):
            raise ValueError("at and sync time the playback: output 'publish' plays nothing")
        return self


class StopCommand(BaseModel):
    """Empty: the job playing; `all`: also the queue; `id`: that job, playing or queued."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    all: bool = False
    id: str | None = Field(None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _one_target(self) -> StopCommand:
        if self.all and self.id is not None:
            raise ValueError("give either 'all' or 'id', not both")
        return self


class VoiceInstallCommand(BaseModel):
    """`voices/install` and `voices/remove`: a catalogue voice by key (or alias)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    id: JobId = Field(
        default_factory=lambda: uuid.uuid4().hex[:12],
        description="request id, echoed in each of its `voice_install` events",
    )


def parse_voice_install(payload: bytes, max_bytes: int) -> VoiceInstallCommand:
    """JSON `{"name": ..., "id": ...}`, or the name as plain text."""
    text = _decode(payload, max_bytes).strip()
    if text.startswith("{"):
        return _validated(VoiceInstallCommand, _json_object(text))
    return _validated(VoiceInstallCommand, {"name": text})


def _decode(payload: bytes, max_bytes: int) -> str:
    if len(payload) > max_bytes:
        raise CommandError(f"payload is {len(payload)} bytes, above the maximum {max_bytes}")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadablePayload(
            f"payload is not UTF-8 text (bad byte at offset {error.start})"
        ) from None


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        # json's own messages may end in "at" ("Unterminated string starting at").
        problem = error.msg.removesuffix(" at")
        raise UnreadablePayload(
            f"invalid JSON: {problem} at line {error.lineno} column {error.colno}"
        ) from None
    if not isinstance(data, dict):
        raise UnreadablePayload(f"a JSON payload must be an object, got {_JSON_KINDS[type(data)]}")
    return data


def _validated(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        job_id = data.get("id") if isinstance(data.get("id"), str) else None
        message = format_validation_error(error, noun="field").replace("\n", "; ")
        if any(
            item["type"] == "extra_forbidden" and len(item["loc"]) == 1 for item in error.errors()
        ):
            fields = (field.alias or name for name, field in model.model_fields.items())
            message += f" (the fields are {', '.join(fields)})"
        raise CommandError(message, job_id) from None


def check_reply_topic(command: SayCommand, base_topic: str, prefixes: list[str]) -> None:
    """A payload may only direct audio under the base topic, or under a configured prefix, so
    that a command cannot make the box publish onto another device's topics."""
    topic = command.reply_topic
    if topic is None:
        return
    allowed = [base_topic, *prefixes]
    if not any(topic.startswith(prefix + "/") for prefix in allowed):
        raise CommandError(
            f"reply_topic: {topic[:80]!r} is outside {base_topic}/ "
            "(mqtt.reply_topic_prefixes allows more)",
            command.id,
        )


def say_schema() -> dict[str, Any]:
    """JSON Schema of the `say` payload, as published in docs/say.schema.json."""
    schema = SayCommand.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def say_request(**fields: Any) -> SayCommand:
    """The one request type, built by an adapter from its transport's own fields (query
    parameters, OpenAI's body, a Wyoming event): validated as a `say` payload is; CommandError
    names a bad field."""
    return _validated(SayCommand, fields)


def parse_json_model(model: type[ModelT], payload: bytes, max_bytes: int) -> ModelT:
    """A JSON object payload validated into `model` (the adapters' payloads: Hermes, ...)."""
    return _validated(model, _json_object(_decode(payload, max_bytes)))


def parse_voice(payload: bytes, max_bytes: int) -> str:
    """A voice name as plain text (what Home Assistant's `select` sends)."""
    name = _decode(payload, max_bytes).strip()
    if not name or len(name) > 64:
        raise CommandError(f"voice: {name[:40]!r} is not a voice name")
    return name


def parse_say(payload: bytes, max_bytes: int) -> SayCommand:
    """JSON object → SayCommand; anything else that is text → the text to speak."""
    text = _decode(payload, max_bytes)
    if text.lstrip().startswith("{"):
        return _validated(SayCommand, _json_object(text))
    return _validated(SayCommand, {"text": text})


def parse_stop(payload: bytes, max_bytes: int) -> StopCommand:
    text = _decode(payload, max_bytes).strip()
    if not text:
        return StopCommand()
    return _validated(StopCommand, _json_object(text))


def parse_pause(payload: bytes, max_bytes: int) -> bool:
    """true/false (also 1/0, on/off), or {"paused": true}."""
    text = _decode(payload, max_bytes).strip().lower()
    words = {"true": True, "1": True, "on": True, "false": False, "0": False, "off": False}
    if text in words:
        return words[text]
    data = _json_object(text) if text.startswith("{") else None
    if data is None or set(data) != {"paused"} or not isinstance(data["paused"], bool):
        raise CommandError(f'pause: {text[:40]!r} is not true/false or {{"paused": true}}')
    return data["paused"]


def parse_volume(payload: bytes, max_bytes: int) -> float:
    """A bare number (0.4) or {"volume": 0.4}."""
    text = _decode(payload, max_bytes).strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise CommandError(f"{text[:40]!r} is not a number") from None
    if isinstance(data, dict):
        if set(data) != {"volume"}:
            raise CommandError(f"volume payload takes one field 'volume', got {sorted(data)}")
        data = data["volume"]
    if isinstance(data, bool) or not isinstance(data, (int, float)) or not 0 <= data <= 1:
        raise CommandError(f"{data!r} is not a number from 0 to 1")
    return float(data)
