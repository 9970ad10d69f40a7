"""The composition root: builds the service's parts from the config and wires them, in the
direction data flows (interfaces → intake → queue → lanes → player/outbox, events beside)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from daemon.adapters.fleet import Fleet
from daemon.adapters.hermes import HermesTts
from daemon.adapters.homeassistant import HomeAssistantDiscovery
from daemon.adapters.local_server import LocalServer
from daemon.adapters.render_queue import RenderQueue
from daemon.adapters.wyoming_server import WyomingServer
from daemon.audio.player import SERVICE_NO_DEVICE_HINT, Player
from daemon.box.files import state_root
from daemon.config import Config
from daemon.local_socket import service_socket_path
from daemon.mqtt.broker import MqttLink, TopicHandler
from daemon.mqtt.command_topics import MqttCommands
from daemon.mqtt.voice_installs import VoiceInstalls
from daemon.runtime.select import create_backend
from daemon.service.event_sink import EventSink
from daemon.service.front_door import FrontDoor
from daemon.service.intake import JobIntake
from daemon.service.jobs import JobQueue
from daemon.service.journal import JobJournal
from daemon.service.lanes import Lane, publish_only
from daemon.service.lifecycle import Service
from daemon.service.outbox import Outbox
from daemon.service.scheduler import Scheduler
from daemon.service.settings import Settings
from daemon.speech.cache import phrase_cache
from daemon.speech.synthesizer import Synthesizer
from daemon.voices.registry import VoiceRegistry

if TYPE_CHECKING:
    from daemon.adapters.http_server import HttpServer


def build_service(config: Config) -> Service:
    settings = Settings(config)
    backend, backend_reason = create_backend(config, concurrent=True)
    voices = VoiceRegistry(config, backend)
    cache = phrase_cache(config.cache)
    synthesizer = Synthesizer(voices, settings, cache, max_requests=backend.workers)
    player = Player.from_config(config.audio, hint=SERVICE_NO_DEVICE_HINT)
    queue = JobQueue(config.queue.max_jobs)
    journal = None
    journal_dir = config.queue.journal_dir or state_root() / "jobs"
    if config.queue.persist:
        journal = JobJournal(journal_dir)

    local = None
    socket_path = service_socket_path()
    reply_prefix = f"{config.mqtt.base_topic}/local"
    outbox = Outbox(config.mqtt.base_topic)
    events = EventSink(outbox)
    # One lane owns the player; parallel workers add lanes for publish-only jobs.
    lanes = [
        Lane(
            queue=queue,
            synthesizer=synthesizer,
            player=player,
            settings=settings,
            emit=events.emit,
            publish=outbox.publish,
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
    if config.local.socket and socket_path is not None:
        local = LocalServer(socket_path, door, reply_prefix)
        outbox.routes.append(local.deliver)
        door.listen(local.on_event)
    commands = MqttCommands(door, outbox)

    fleet = Fleet(config.mqtt, commands.handlers(), outbox.publish)
    scheduler = Scheduler(
        settings, intake.submit, events.emit, synthesizer, journal_dir.parent / "schedules.json"
    )
    external: dict[str, TopicHandler] = fleet.subscriptions()
    render = None
    if config.mqtt.render_group is not None:  # the config made sure of a fleet topic
        render = RenderQueue(door)
        door.listen(render.on_event)
    discovery = None
    if config.homeassistant.discovery:
        discovery = HomeAssistantDiscovery(config, outbox.publish, voices.usable)
        external.update(discovery.subscriptions())
    if config.hermes.enabled:
        hermes = HermesTts(settings, door.submit, outbox.publish)
        external.update(hermes.subscriptions())
        door.listen(hermes.on_event)
    wyoming = None
    if config.wyoming.uri is not None:
        wyoming = WyomingServer(config.wyoming.uri, door)

    http = None
    address = config.http.address()
    if address is not None:
        http = _http_server(address, config, door, events, lambda: service)

    def on_online() -> None:  # the broker (re)connected: the service republishes its state
        service.on_online()

    installs = VoiceInstalls(
        settings, events, lambda: service.refresh_voices(), backend.gpu_report() is not None
    )
    handlers = {**commands.handlers(), **installs.handlers()}
    link = MqttLink(config.mqtt, handlers, on_online, external)
    outbox.attach(link.publish)
    service = Service(
        settings=settings,
        backend_reason=backend_reason,
        voices=voices,
        cache=cache,
        synthesizer=synthesizer,
        player=player,
        queue=queue,
        journal=journal,
        outbox=outbox,
        events=events,
        lanes=lanes,
        intake=intake,
        commands=commands,
        link=link,
        discovery=discovery,
        fleet=fleet,
        scheduler=scheduler,
        render=render,
        wyoming=wyoming,
        local=local,
        http=http,
    )
    return service


def _http_server(
    address: tuple[str, int],
    config: Config,
    door: FrontDoor,
    events: EventSink,
    service: Callable[[], Service],
) -> HttpServer:
    """The HTTP interface and its metrics (imported only when `http.listen` is set)."""
    from daemon.adapters.http_common import HttpPorts
    from daemon.adapters.http_server import HttpServer
    from daemon.service.metrics import Metrics

    token = config.http.token()
    ports = HttpPorts(
        door=door,
        status=lambda: service().info(),
        metrics=Metrics(lambda: service().metrics_state()),
        token=None if token is None else token.get_secret_value(),
    )
    door.listen(ports.watchers.on_event)
    events.observers.append(ports.metrics.observe)
    return HttpServer(address, ports)
