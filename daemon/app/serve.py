"""`fastvoice serve`: the config as the service reads it (the file, with `--wyoming` and `--http`
over it), the service built from it, and the supervisor that runs it until SIGTERM. The one
place that knows all three, so none of them imports another's maker."""

from __future__ import annotations

from pathlib import Path

from daemon.admin.config_checks import load_on_box
from daemon.app.composition import build_service
from daemon.app.supervisor import Supervisor
from daemon.config import Config, HttpConfig, WyomingConfig, config_path_in_use


def serve(
    config_path: Path | None,
    wyoming: str | None = None,
    unregister: bool = False,
    http: str | None = None,
) -> int:
    """Runs the service; `wyoming` overrides `wyoming.uri`, `http` `http.listen`; `unregister`
    removes the Home Assistant entities instead, and exits."""
    path = config_path_in_use(config_path)

    def load() -> Config:
        """The file, with `--wyoming` and `--http` over it (a reload reads the file again: the
        options stay)."""
        config = load_on_box(path)
        if wyoming is not None:
            config = config.model_copy(update={"wyoming": WyomingConfig.checked(wyoming)})
        if http is not None:
            listen = HttpConfig.checked(http).listen
            config = config.model_copy(
                update={"http": config.http.model_copy(update={"listen": listen})}
            )
        return config

    config = load()
    if unregister:
        from daemon.adapters.homeassistant import node_id
        from daemon.adapters.homeassistant import unregister as unregister_discovery

        count = unregister_discovery(config)
        print(f"removed {count} Home Assistant entities of node {node_id(config)!r}")
        return 0
    return Supervisor(build_service(config), load).run()
