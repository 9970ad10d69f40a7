"""A running `fastvoice serve` takes catalogue voices without a restart: the MQTT command
`voices/install` (with its progress events) or a CLI install and SIGHUP; every interface then
lists and speaks them (MQTT, Wyoming, HTTP and OpenAI, Home Assistant's voice select), speakers
of a multi-speaker voice by name."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid

import httpx
import numpy as np
import pytest
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.conftest import EMBEDDED_RATE, run_cli
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import free_port
from tests.test_wyoming import exchange, pcm_of

GERMAN = "de_DE-thorsten-medium"
TRIO = "en_GB-trio-medium"


@pytest.fixture(scope="module")
def box(broker, alsa, catalog_server, tmp_path_factory):
    directory = tmp_path_factory.mktemp("hot-install")
    wyoming_port, http_port = free_port(), free_port()
    running = Daemon(
        broker,
        directory,
        alsa.env(),
        recorder_options={"also": ("homeassistant/#",)},
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}"},
        catalog={
            "url": catalog_server.url + "voices.json",
            "files_url": catalog_server.url,
            "dir": str(directory / "voices"),
        },
        runtime={"precision": "fp32", "artifact_dir": str(directory / "artifacts")},
        wyoming={"uri": f"tcp://127.0.0.1:{wyoming_port}"},
        http={"listen": f"127.0.0.1:{http_port}"},
        homeassistant={"discovery": True, "node_id": f"hot{uuid.uuid4().hex[:6]}"},
    )
    running.wyoming_port = wyoming_port
    running.url = f"http://127.0.0.1:{http_port}"
    running.directory = directory
    yield running
    running.stop()


def install_events(box: Daemon, request_id: str, until: str = "installed") -> list[dict]:
    """The request's voice_install events up to and including the `until` state."""
    box.recorder.wait_for(
        lambda t, p: (
            t == f"{box.base}/events"
            and json.loads(p)["id"] == request_id
            and json.loads(p).get("state") in (until, "failed")
        ),
        timeout=300,
    )
    return [
        json.loads(p)
        for t, p, _ in box.recorder.drain()
        if t == f"{box.base}/events"
        and json.loads(p)["event"] == "voice_install"
        and json.loads(p)["id"] == request_id
    ]


def voice_select_options(box: Daemon) -> list[str]:
    configs = [
        json.loads(p)
        for t, p, _ in box.recorder.drain()
        if t.startswith("homeassistant/select/") and t.endswith("/voice/config") and p
    ]
    assert configs
    return configs[-1]["options"]


def test_mqtt_install_reports_progress_and_the_voice_speaks_everywhere(box, capture):
    box.recorder.publish("voices/install", json.dumps({"name": GERMAN, "id": "get-german"}))
    events = install_events(box, "get-german")
    states = [event["state"] for event in events]
    assert states[-1] == "installed", events
    assert "downloading" in states and states.index("building") < states.index("installed")
    model = [e for e in events if e.get("file") == f"{GERMAN}.onnx"]
    assert model[-1]["done"] == model[-1]["total"] > 10_000_000
    assert events[-1]["language"] == "de_DE"

    job = say(box, text="Der Zug fährt um 14:30 Uhr.", voice=GERMAN)
    assert box.recorder.event(job, "finished", timeout=120)["id"] == job
    assert capture.played().size > EMBEDDED_RATE

    info = asyncio.run(exchange(box.wyoming_port, [Describe()], "info"))[-1]
    voices = {voice.name: voice for voice in Info.from_event(info).tts[0].voices}
    assert voices[GERMAN].installed and voices[GERMAN].languages == ["de_DE"]
    spoken = asyncio.run(
        exchange(
            box.wyoming_port,
            [Synthesize(text="Guten Tag.", voice=SynthesizeVoice(name=GERMAN))],
            "audio-stop",
        )
    )
    assert pcm_of(spoken).size > 11025

    with httpx.Client(base_url=box.url, timeout=120) as http:
        listed = http.get("/v1/audio/voices").json()["voices"]
        assert {v["id"]: v["language"] for v in listed}[GERMAN] == "de_DE"
        audio = http.post(
            "/v1/audio/speech",
            json={"model": "x", "input": "Hallo.", "voice": GERMAN, "response_format": "wav"},
        )
        # "Hallo.": about half a second, its durations drawn at random (noise_w)
        assert audio.status_code == 200 and len(audio.content) > 44 + EMBEDDED_RATE // 2

    assert GERMAN in voice_select_options(box)
    box.recorder.publish("voice", GERMAN)  # Home Assistant's select: the default voice
    box.recorder.wait_for(lambda t, p: t == f"{box.base}/voice/state" and p == GERMAN.encode())


def test_a_kokoro_voice_installs_over_mqtt_with_nothing_to_download(box):
    name = "ja_JP-kokoro-jf_tebukuro"
    box.recorder.publish("voices/install", json.dumps({"name": name, "id": "get-kokoro"}))
    events = install_events(box, "get-kokoro")
    assert [event["state"] for event in events] == ["building", "installed"], events
    assert events[-1]["language"] == "ja_JP"
    job = say(box, text="まもなく発車いたします。", voice=name)
    assert box.recorder.event(job, "finished", timeout=120)["audio_s"] > 1.0
    assert name in voice_select_options(box)


def test_bad_install_requests_fail_with_a_reason_and_the_box_goes_on(box):
    box.recorder.publish("voices/install", json.dumps({"name": "xx_XX-nobody-low", "id": "nope"}))
    failed = install_events(box, "nope")[-1]
    assert failed["state"] == "failed" and "not in the catalogue" in failed["message"]
    box.recorder.publish("voices/install", b'{"name": 5, "id": "typed"}')
    assert "name" in install_events(box, "typed")[-1]["message"]
    box.recorder.publish("voices/install", b"\xff\xfe")
    box.recorder.wait_for(
        lambda t, p: t == f"{box.base}/events" and b"UTF-8" in p and b"voice_install" in p
    )
    job = say(box, text="Still here.")
    box.recorder.event(job, "finished", timeout=120)


def test_a_cli_install_is_taken_at_sighup_with_its_speakers(box, capture):
    config = box.directory / "cli.yaml"
    served = json.loads(box.config_path.read_text())
    config.write_text(json.dumps({k: served[k] for k in ("catalog", "runtime")}))
    result = run_cli("voices", "install", TRIO, "--config", str(config), timeout=300)
    assert result.returncode == 0, result.stderr
    box.recorder.drain()
    since = len(box.recorder.seen)
    box.process.send_signal(signal.SIGHUP)

    def lists_trio(topic: str, payload: bytes) -> bool:
        if topic != f"{box.base}/status/info":
            return False
        return TRIO in [voice["name"] for voice in json.loads(payload)["voices"]]

    info = json.loads(box.recorder.wait_for(lists_trio, since=since)[1])
    trio = next(voice for voice in info["voices"] if voice["name"] == TRIO)
    assert trio["speakers"] == ["anna", "ben", "carl"]

    levels = {}
    for speaker in ("anna", "ben"):
        capture.reset()
        job = say(
            box, text="The next train leaves from platform four.", voice=TRIO, speaker=speaker
        )
        box.recorder.event(job, "finished", timeout=120)
        levels[speaker] = float(np.sqrt(np.mean(capture.played() ** 2)))
    # ben's graph is 12 dB quieter than anna's; the measured gains even them out.
    assert abs(20 * np.log10(levels["anna"] / levels["ben"])) < 1.5

    job = say(box, text="Hello.", voice=TRIO, speaker="dora")
    failed = box.recorder.event(job, "rejected", timeout=60)
    assert "dora" in failed["message"] and "anna" in failed["message"]
