"""One compose project on a Docker engine: its model (the files as compose normalizes them), what each
service is (a controller, a broker, a ZooKeeper server), its containers, and the things done to a
container from outside (taking it off its networks and putting it back).

``make compose-test`` and ``python -m chaos run --compose`` both work through this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config import ZOOKEEPER_SESSION_TIMEOUT_MS
from deploy.engine import EngineError, compose_binary, docker, run

__all__ = [
    "COMPOSE_FILE",
    "LEFT_OUT",
    "Compose",
    "ComposeError",
    "addresses",
    "daemon_role",
    "disconnect",
    "networks_of",
    "reconnect",
    "session_timeout_s",
    "status",
    "stop_grace_s",
    "zookeeper_id",
]

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yml"
LEFT_OUT = ("grafana",)
"""Services with no local image (docs/docker.md says why)."""


class ComposeError(EngineError):
    """The project is not as expected: a service without its container, a model without a service."""


@dataclass
class Compose:
    """``docker compose [-p PROJECT] -f FILE...``, with ``environment`` (the image variables) added to
    this process's own. Without ``project``, the files name it (``name:`` in docker-compose.yml)."""

    environment: dict[str, str]
    project: str | None = None
    files: tuple[Path, ...] = (COMPOSE_FILE,)
    admin_args: tuple[str, ...] = ()
    """What the admin CLI inside the network needs besides $KAFKA_ZOOKEEPER_CONNECT (the secured
    variant's ZooKeeper identity)."""

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        project = ("-p", self.project) if self.project else ()
        files = [arg for file in self.files for arg in ("-f", str(file))]
        argv = [str(compose_binary()), *project, *files, *args]
        return run(argv, env=self.environment, check=check, timeout=timeout).stdout

    def model(self) -> dict[str, Any]:
        return dict(json.loads(self("config", "--format", "json")))

    def services(self) -> list[str]:
        return [s for s in self("config", "--services").split() if s not in LEFT_OUT]

    def container(self, service: str) -> str:
        """The id of ``service``'s container, running or not."""
        ids = self("ps", "--all", "--quiet", service).split()
        if len(ids) != 1:
            raise ComposeError(f"expected one container for {service}, found {ids}")
        return ids[0]

    def states(self) -> dict[str, str]:
        """Service -> its health (``healthy``, ``starting``...) or, without a healthcheck, its state
        (``running``, ``paused``, or ``exited N`` with its exit code: one-shot services)."""
        lines = self("ps", "--all", "--format", "json").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        return {row["Service"]: row.get("Health") or _state(row) for row in rows}

    def brokers(self) -> dict[int, int]:
        """Broker id -> epoch (czxid), from ZooKeeper's ``/brokers/ids``, asked from inside the network
        (ZooKeeper is not published): the admin CLI in a controller's container."""
        command = ["python", "-m", "cluster", "brokers", "--json", *self.admin_args]
        out = self("exec", "-T", "controller-1001", *command, timeout=60)
        return {b["broker_id"]: b["epoch"] for b in json.loads(out)["brokers"]}

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes still labelled with this project."""
        label = f"label=com.docker.compose.project={self.project or self.model()['name']}"
        return {
            kind: docker(*command, "--quiet", "--filter", label).stdout.split()
            for kind, command in {
                "containers": ("ps", "--all"),
                "networks": ("network", "ls"),
                "volumes": ("volume", "ls"),
            }.items()
        }


def _state(row: dict[str, Any]) -> str:
    return f"exited {row.get('ExitCode')}" if row["State"] == "exited" else str(row["State"])


# ---------------------------------------------------------------- what a service is


def daemon_role(service: dict[str, Any]) -> str | None:
    """``controller`` or ``broker`` for a service running ``python -m controller|broker``; None for
    anything else (a one-shot of the same image, ZooKeeper, Prometheus)."""
    command = service.get("command") or []
    module = command[command.index("-m") + 1 :][:1] if "-m" in command else []
    return module[0] if module in (["controller"], ["broker"]) else None


def zookeeper_id(service: dict[str, Any]) -> int | None:
    """The server id of a ZooKeeper service (its ``ZOO_MY_ID``), None for any other service."""
    value = (service.get("environment") or {}).get("ZOO_MY_ID")
    return int(value) if value else None


def session_timeout_s(service: dict[str, Any]) -> float:
    """A daemon's ZooKeeper session timeout as the compose file sets it (or the daemons' default)."""
    environment = service.get("environment") or {}
    value = environment.get("KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS") or ZOOKEEPER_SESSION_TIMEOUT_MS.default
    return int(value) / 1000


_DURATION = re.compile(r"^(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")


def stop_grace_s(service: dict[str, Any], default: float = 10.0) -> float:
    """``stop_grace_period`` in seconds (compose writes it as ``30s`` or ``1m30s``); Docker's 10 s
    when unset."""
    text = str(service.get("stop_grace_period") or "")
    match = _DURATION.match(text)
    if not text or match is None:
        return default
    return 60 * int(match["m"] or 0) + float(match["s"] or 0)


# ---------------------------------------------------------------- a container's networks


def networks_of(container: str) -> dict[str, Any]:
    """Network name -> the container's settings on it (aliases, address)."""
    inspected = docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", container).stdout
    return dict(json.loads(inspected))


def addresses(container: str) -> list[str]:
    """The container's IPv4 addresses, one per network it is on."""
    return [n["IPAddress"] for n in networks_of(container).values() if n.get("IPAddress")]


def disconnect(container: str) -> dict[str, Any]:
    """Take the container off every network (a machine unplugged); returns what :func:`reconnect`
    needs to put it back."""
    networks = networks_of(container)
    for network in networks:
        docker("network", "disconnect", network, container)
    return networks


def reconnect(container: str, networks: dict[str, Any]) -> None:
    """Put the container back on ``networks`` with the aliases compose gave it (its service name),
    so the other containers find it by name again."""
    for network, settings in networks.items():
        aliases = [a for a in settings.get("Aliases") or [] if not container.startswith(a)]
        docker("network", "connect", *(f"--alias={a}" for a in aliases), network, container)


def status(container: str) -> str:
    """``healthy``/``starting``/``unhealthy`` for a running container with a healthcheck, else its
    state: ``running``, ``paused``, ``exited``..."""
    template = "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"
    state, _, health = docker("inspect", "--format", template, container).stdout.strip().partition(" ")
    return health if state == "running" and health else state
