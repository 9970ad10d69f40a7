"""The composition root: builds the service's parts from the config in the direction data flows
back from the outputs (voices → synthesizer → player and broker → queue and lanes → the front
door → the interfaces), each from parts already built, and lists them as steps to start and
stop (`daemon.app.bootsteps`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.adapters.fleet import Fleet
from daemon.adapters.hermes import HermesTts
from daemon.adapters.homeassistant import HomeAssistantDiscovery
from daemon.adapters.local_server import LocalServer
from daemon.adapters.render_queue import RenderQueue
from daemon.adapters.wyoming_server import WyomingServer
from daemon.app.bootsteps import Step, Steps
from daemon.app.lifecycle import Service
from daemon.audio.player import SERVICE_NO_DEVICE_HINT, Player
from daemon.box.files import state_root
from daemon.config import Config
from daemon.local_socket import service_socket_path
from daemon.mqtt.broker import MqttLink
from daemon.mqtt.command_topics import MqttCommands
from daemon.mqtt.voice_installs import VoiceInstalls
from daemon.runtime.select import create_backend
from daemon.service.event_sink import EventSink
from daemon.service.expiry import ExpiryWatch
from daemon.service.front_door import FrontDoor
from daemon.service.intake import JobIntake
from daemon.service.jobs import JobQueue
from daemon.service.journal import JobJournal
from daemon.service.lanes import Lane, publish_only
from daemon.service.outbox import Outbox
from daemon.service.outputs import JobOutputs
from daemon.service.scheduler import Scheduler
from daemon.service.settings import Settings
from daemon.service.status import StatusReport
from daemon.service.voice_loading import VoiceLoading
from daemon.speech.cache import phrase_cache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.registry import VoiceRegistry

if TYPE_CHECKING:  # imported only when HTTP is on
    from daemon.adapters.http_server import HttpServer

log = logging.getLogger(__name__)


@dataclass
class Core:
    """The parts every service has, built first: what the interfaces are wired to."""

    settings: Settings
    backend_reason: str
    synthesizer: Synthesizer
    loading: VoiceLoading
    player: Player
    link: MqttLink
    outbox: Outbox
    events: EventSink
    queue: JobQueue
    journal: JobJournal | None
    lanes: list[Lane]
    intake: JobIntake
    door: FrontDoor
    status: StatusReport


def build_service(config: Config) -> Service:
    core = _core(config)
    expiry = ExpiryWatch(core.queue, core.events)
    steps = [
        Step("voices", core.loading.start),
        Step("broker", core.link.start, core.link.stop),
        Step("recovered jobs", core.intake.recover),
        Step("expiry watch", expiry.start, expiry.shutdown),
        Step("lanes", lambda: _start_lanes(core.lanes), lambda: _stop_lanes(core.lanes)),
        *_interfaces(config, core),
    ]
    return Service(
        settings=core.settings,
        steps=Steps(steps),
        loading=core.loading,
        status=core.status,
        door=core.door,
        voices=core.synthesizer.voices,
        cache=core.synthesizer.cache,
        player=core.player,
        queue=core.queue,
        lanes=core.lanes,
        events=core.events,
        outbox=core.outbox,
    )


def _core(config: Config) -> Core:
    settings = Settings(config)
    backend, backend_reason = create_backend(config, concurrent=True)
    voices = VoiceRegistry(config, backend)
    cache = phrase_cache(config.cache)
    synthesizer = Synthesizer(voices, settings, cache, max_requests=backend.workers)
    player = Player.from_config(config.audio, hint=SERVICE_NO_DEVICE_HINT)
    link = MqttLink(config.mqtt)
    outbox = Outbox(config.mqtt.base_topic)
    outbox.attach(link.publish)
    events = EventSink(outbox)
    loading = VoiceLoading(settings, synthesizer, cache, events, lambda: link.connected)
    queue = JobQueue(config.queue.max_jobs)
    journal = JobJournal(_journal_dir(config)) if config.queue.persist else None
    outputs = JobOutputs(settings, player, outbox.publish)
    # One lane owns the player; parallel workers add lanes for publish-only jobs.
    lanes = [
        Lane(
            queue=queue,
            synthesizer=synthesizer,
            outputs=outputs,
            settings=settings,
            emit=events.emit,
            name="player-lane" if number == 0 else f"publish-lane-{number}",
            accepts=None if number == 0 else publish_only,
        )
        for number in range(backend.workers)
    ]
    intake = JobIntake(
        settings=settings, voices=voices, queue=queue, journal=journal, events=events, lanes=lanes
    )
    door = FrontDoor(
        settings=settings,
        intake=intake,
        queue=queue,
        lanes=lanes,
        player=player,
        synthesizer=synthesizer,
        events=events,
    )
    status = StatusReport(
        settings=settings,
        backend_reason=backend_reason,
        loading=loading,
        cache=cache,
        journal=journal,
        player=player,
        queue=queue,
        lanes=lanes,
        link=link,
        outbox=outbox,
    )
    link.online_listeners += [loading.announce_broken, status.publish_info]
    return Core(
        settings, backend_reason, synthesizer, loading, player, link, outbox, events, queue,
        journal, lanes, intake, door, status,
    )  # fmt: skip


def _interfaces(config: Config, core: Core) -> list[Step]:
    """The interfaces that feed the front door, each wired to the broker and the report, and
    the steps of those that run on their own."""
    door, link, status, outbox = core.door, core.link, core.status, core.outbox
    commands = MqttCommands(door, outbox)
    link.route(commands.handlers())
    link.online_listeners.append(commands.publish_state)
    gpu_in_play = core.synthesizer.voices.backend.gpu_report() is not None

    def voices_changed() -> None:  # installed or removed over MQTT
        core.loading.refresh()
        status.publish_info()

    link.route(VoiceInstalls(core.settings, core.events, voices_changed, gpu_in_play).handlers())
    fleet = Fleet(config.mqtt, commands.handlers(), outbox.publish)
    link.subscribe(fleet.subscriptions())
    link.online_listeners.append(fleet.announce)
    status.reporters.append(lambda: {"fleet": fleet.as_dict()})
    steps = [Step("fleet", lambda: None, lambda: fleet.withdraw() if link.connected else None)]
    if config.homeassistant.discovery:
        discovery = HomeAssistantDiscovery(config, outbox.publish, core.synthesizer.voices.usable)
        link.subscribe(discovery.subscriptions())
        link.online_listeners.append(discovery.announce)
        core.loading.changed_listeners.append(discovery.announce)
    if config.hermes.enabled:
        hermes = HermesTts(core.settings, door.submit, outbox.publish)
        link.subscribe(hermes.subscriptions())
        door.listen(hermes.on_event)
    return steps + _servers(config, core)


def _servers(config: Config, core: Core) -> list[Step]:
    """The interfaces with threads of their own: the scheduler, Wyoming, HTTP, the local
    socket, the fleet's render queue (started last: it takes jobs from other boxes)."""
    door, status, settings = core.door, core.status, core.settings
    scheduler = Scheduler(
        settings,
        door.submit,
        core.events.emit,
        core.synthesizer,
        _journal_dir(config).parent / "schedules.json",
    )
    status.reporters.append(lambda: {"schedules": scheduler.upcoming()})
    steps = [Step("scheduler", scheduler.start, scheduler.shutdown)]
    if config.wyoming.uri is not None:
        wyoming = WyomingServer(config.wyoming.uri, door)
        steps.append(
            Step("wyoming", lambda: _start_server(wyoming, "serving MQTT only"), wyoming.shutdown)
        )
    address = config.http.address()
    if address is not None:
        http = _http_server(address, config, core)
        status.reporters.append(
            lambda: {"http": "{}:{}".format(*http.address), "http_problem": http.error}
        )
        steps.append(
            Step("http", lambda: _start_server(http, "serving without HTTP"), http.shutdown)
        )
    socket_path = service_socket_path()
    if config.local.socket and socket_path is not None:
        local = LocalServer(socket_path, door, f"{config.mqtt.base_topic}/local")
        core.outbox.routes.append(local.deliver)
        door.listen(local.on_event)
        status.reporters.append(
            lambda: {"local_socket": str(local.path), "local_socket_problem": local.problem}
        )
        steps.append(Step("local socket", lambda: _start_local(local), local.shutdown))
    if config.mqtt.render_group is not None:  # the config made sure of a fleet topic
        render = RenderQueue(door)
        door.listen(render.on_event)
        status.reporters.append(lambda: {"render_queue": render.as_dict()})
        steps.append(Step("render queue", lambda: render.start(config.mqtt), render.stop))
    return steps


def _start_lanes(lanes: list[Lane]) -> None:
    for lane in lanes:
        lane.start()


def _stop_lanes(lanes: list[Lane]) -> None:
    for lane in lanes:
        lane.shutdown()
    for lane in lanes:
        lane.join(timeout=10)


def _start_server(server: WyomingServer | HttpServer, without: str) -> None:
    """Starts a server thread and waits until it listens; one that cannot is logged, and the
    service goes on `without` it."""
    server.start()
    server.ready.wait(30)
    if server.error is not None:
        log.error("%s; %s", server.error, without)


def _start_local(local: LocalServer) -> None:
    if local.listen():
        local.start()
        log.info("local jobs on %s", local.path)
    else:
        log.error("%s; `fastvoice say` will speak on its own", local.problem)


def _http_server(address: tuple[str, int], config: Config, core: Core) -> HttpServer:
    """The HTTP interface and its metrics (imported only when `http.listen` is set)."""
    from daemon.adapters.http_common import HttpPorts
    from daemon.adapters.http_server import HttpServer
    from daemon.service.metrics import Metrics

    token = config.http.token()
    ports = HttpPorts(
        door=core.door,
        status=core.status.info,
        metrics=Metrics(core.status.metrics_state),
        token=None if token is None else token.get_secret_value(),
    )
    core.door.listen(ports.watchers.on_event)
    core.events.observers.append(ports.metrics.observe)
    return HttpServer(address, ports)


def _journal_dir(config: Config) -> Path:
    """Where the job journal lives (the schedules' state beside it)."""
    return config.queue.journal_dir or state_root() / "jobs"
