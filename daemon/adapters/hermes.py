"""Rhasspy's Hermes TTS over MQTT, on top of the same queue.

`hermes/tts/say` becomes a job; when it ends, `hermes/tts/sayFinished` goes out once, with the
request's `id`, `siteId` and `sessionId`; a refused or failed request gets `hermes/error/tts`
instead. With `remote_playback`, the audio goes to the site's audio server as one WAV
(`hermes/audioServer/<siteId>/playBytes/<requestId>`) and sayFinished waits for its
`playFinished` (or for `play_finished_timeout_s`).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from daemon.config import HermesConfig
from daemon.events import Refusal
from daemon.service.commands import CommandError, LanguageTag, SayCommand, parse_json_model
from daemon.service.settings import Settings

log = logging.getLogger(__name__)

SAY = "hermes/tts/say"
SAY_FINISHED = "hermes/tts/sayFinished"
ERROR = "hermes/error/tts"
Publish = Callable[[str, str, bool], None]  # publish(topic, payload, retain)
Submit = Callable[[SayCommand], "Refusal | None"]  # None when accepted, else why not
PLAIN_LEVEL = r"^[^/#+\x00]{1,128}$"


class HermesSay(BaseModel):
    """The `hermes/tts/say` payload (Rhasspy's TtsSay), by the protocol's names only: a
    `site_id` is an unknown field, named with the fields there are (`siteId`, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str  # empty: refused as bad_text, as on every interface
    site_id: str = Field("default", alias="siteId", pattern=PLAIN_LEVEL)
    lang: LanguageTag | None = None
    id: str | None = Field(None, max_length=256)
    session_id: str | None = Field(None, alias="sessionId", max_length=256)
    volume: float | None = Field(None, ge=0.0, le=1.0)


class HermesPlayFinished(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str | None = None
    session_id: str | None = Field(None, alias="sessionId")


@dataclass
class _Request:
    say: HermesSay
    remote: bool  # its audio went to the site's audio server: it ends at playFinished
    timer: threading.Timer | None = field(default=None, repr=False)


class HermesTts:
    """Reads the `hermes` section and `queue.max_payload_bytes` from the config in force, at
    each message: a reload reaches requests that arrive after it."""

    def __init__(self, settings: Settings, submit: Submit, publish: Publish) -> None:
        self.settings = settings
        self.submit = submit
        self.publish = publish
        self._requests: dict[str, _Request] = {}
        self._lock = threading.Lock()

    @property
    def config(self) -> HermesConfig:
        return self.settings.config.hermes

    @property
    def max_payload_bytes(self) -> int:
        return self.settings.config.queue.max_payload_bytes

    def subscriptions(self) -> dict[str, Callable[[str, bytes], None]]:
        """Every site's playFinished: which sites are answered, and whether playback is
        remote, may change at a reload; only the requests of our own jobs are finished."""
        return {SAY: self.on_say, "hermes/audioServer/+/playFinished": self.on_play_finished}

    def _answers(self, site_id: str) -> bool:
        return self.config.any_site or site_id == self.config.site_id

    def on_say(self, _topic: str, payload: bytes) -> None:
        try:
            say = parse_json_model(HermesSay, payload, self.max_payload_bytes)
        except CommandError as error:
            site, session = _ids_of(payload, self.max_payload_bytes)
            if site is None or self._answers(site):
                self._error(str(error), site, session, context=None)
            return
        if not self._answers(say.site_id):
            return
        job_id = f"hermes-{uuid.uuid4().hex[:12]}"
        options: dict[str, Any] = {"id": job_id, "text": say.text, "volume": say.volume}
        options["language"] = say.lang  # a voice of the site's language
        remote = self.config.remote_playback
        if remote:
            topic = f"hermes/audioServer/{say.site_id}/playBytes/{job_id}"
            options.update(output="publish", reply_topic=topic, format="wav")
        command = SayCommand(**options)  # every field already checked by HermesSay
        with self._lock:
            self._requests[job_id] = _Request(say, remote)
        refused = self.submit(command)
        if refused is not None:
            with self._lock:
                self._requests.pop(job_id, None)
            self._error(refused.message, say.site_id, say.session_id, context=say.text)

    def on_event(self, event: dict[str, Any]) -> None:
        """Job events from the service: the end of a Hermes job answers its request."""
        job_id, kind = event.get("id"), event.get("event")
        request = self._requests.get(job_id)
        if request is None or kind not in ("finished", "interrupted", "failed"):
            return
        if kind == "failed":
            request = self._take(job_id)
            if request is not None:
                message = event.get("message") or event.get("reason", "failed")
                self._error(message, request.say.site_id, request.say.session_id, request.say.text)
        elif request.remote and kind == "finished":
            self._await_playback(job_id)
        else:
            self._finish(job_id)

    def on_play_finished(self, _topic: str, payload: bytes) -> None:
        try:
            played = parse_json_model(HermesPlayFinished, payload, self.max_payload_bytes)
        except CommandError as error:
            log.warning("hermes playFinished ignored: %s", error)
            return
        if played.id is not None:
            self._finish(played.id)

    def _await_playback(self, job_id: str) -> None:
        timer = threading.Timer(self.config.play_finished_timeout_s, self._finish, [job_id, True])
        timer.daemon = True
        with self._lock:
            request = self._requests.get(job_id)
            if request is None:
                return
            request.timer = timer
        timer.start()

    def _take(self, job_id: str) -> _Request | None:
        """The request, once: a second end (late playFinished, timer) finds nothing."""
        with self._lock:
            request = self._requests.pop(job_id, None)
        if request is not None and request.timer is not None:
            request.timer.cancel()
        return request

    def _finish(self, job_id: str, timed_out: bool = False) -> None:
        request = self._take(job_id)
        if request is None:
            return
        if timed_out:
            log.warning("hermes: no playFinished for %s; sending sayFinished anyway", job_id)
        say = request.say
        answer = {"id": say.id, "siteId": say.site_id, "sessionId": say.session_id}
        self.publish(SAY_FINISHED, json.dumps(answer), False)

    def _error(
        self, message: str, site_id: str | None, session_id: str | None, context: str | None
    ) -> None:
        answer = {
            "error": message,
            "context": context,
            "siteId": site_id or self.config.site_id,
            "sessionId": session_id,
        }
        self.publish(ERROR, json.dumps(answer), False)


def _ids_of(payload: bytes, max_bytes: int) -> tuple[str | None, str | None]:
    """siteId and sessionId of a payload that failed validation, when they can be read."""
    if len(payload) > max_bytes:
        return None, None
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    site, session = data.get("siteId"), data.get("sessionId")
    return (
        site if isinstance(site, str) else None,
        session if isinstance(session, str) else None,
    )
