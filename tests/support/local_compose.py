"""A compose model's services run as local processes (:class:`LocalCompose`, :func:`running_compose`).

Each service built from the project's image runs with its own command and environment, in the order
its ``depends_on`` gives, the compose network folded onto loopback: a service's host name, a wildcard
or a loopback host becomes 127.0.0.1, each (service, container port) gets one free local port used
in every ``KAFKA_*`` variable and command argument that names it, and each volume becomes a directory
of the test. One-shot services (those that are not a controller or a broker, e.g. the secured
variant's ``secrets``) run to completion in their turn. The ZooKeeper services are one local
ZooKeeper, the test's (every ZooKeeper service's port P is the same local port); Prometheus and
Grafana are not run. The model itself comes from :mod:`tests.support.compose`.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from broker import config as broker_config
from cluster.processes import DaemonProcess, Event
from controller import config as controller_config
from tests.support.compose import (
    BASE_FILES,
    Model,
    compose_model,
    container_environment,
    daemon_module,
    daemon_services,
    one_shot_services,
    startup_order,
    unescaped,
    zookeeper_services,
)
from tests.support.metrics import scrape_text
from zkserver.ports import find_free_port

ZOOKEEPER_CLIENT_PORT = 2181
"""The official zookeeper image's clientPort."""
LOOPBACK = "127.0.0.1"
LOCAL_HOSTS = frozenset({"", "0.0.0.0", "::", "localhost", LOOPBACK})
"""Hosts that name the container itself (or, for published ports, the machine running compose)."""
START_TIMEOUT_S = 30.0
ONE_SHOT_TIMEOUT_S = 60.0

_ADDRESS = re.compile(r"(?P<lead>^|,|//)(?P<host>[A-Za-z0-9_.-]*):(?P<port>\d+)(?=$|[,/])")


class ComposeDaemon(DaemonProcess):
    """One daemon service as a local process: the service's command and environment, no config file."""

    def __init__(
        self, name: str, workdir: Path, argv: list[str], environment: dict[str, str], log_dir: Path
    ) -> None:
        self.module = argv[argv.index("-m") + 1]
        super().__init__(name, workdir, {})
        self.config.unlink()  # the compose services have no properties file
        self.argv = argv
        self.environment = environment
        self.events_path = log_dir / "events.jsonl"

    def start(self, *, own_session: bool = False) -> ComposeDaemon:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")} | self.environment
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=self.dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=own_session,
            )
        return self


def _after_lead(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement: the match's first group (what leads the path), then ``text``."""
    return lambda m: m[1] + text


StartZooKeeper = Callable[["LocalCompose"], None]
"""Called once, where the ZooKeeper services come in the start-up order: starts the local ZooKeeper
that stands for them, if the test has not already (see :meth:`LocalCompose.zookeeper_config`)."""


class LocalCompose:
    """The services of a compose model built from the project's image, run on loopback against one
    local ZooKeeper: ``zk_connect`` names its plaintext client port (and the test's chroot)."""

    def __init__(self, model: Model, zk_connect: str, workdir: Path) -> None:
        self.model = model
        self.services: dict[str, Model] = model["services"]
        self.workdir = workdir
        hosts, slash, chroot = zk_connect.partition("/")
        zk_port = int(hosts.split(",")[0].rsplit(":", 1)[1])
        self.zk_chroot = slash + chroot
        self.zookeeper = zookeeper_services(model)
        self.ports: dict[tuple[str, int], int] = {}
        if self.zookeeper:
            self.ports[(self.zookeeper[0], ZOOKEEPER_CLIENT_PORT)] = zk_port
        self.daemons: dict[str, ComposeDaemon] = {}

    # -- translation of one service

    def port(self, service: str, container_port: int) -> int:
        """The local port standing for ``service``'s ``container_port``, the same every time (the same
        for every ZooKeeper service: one local server stands for them all)."""
        if service in self.zookeeper:
            service = self.zookeeper[0]
        key = (service, container_port)
        if key not in self.ports:
            taken = set(self.ports.values())
            port = find_free_port(LOOPBACK)
            while port in taken:
                port = find_free_port(LOOPBACK)
            self.ports[key] = port
        return self.ports[key]

    def address(self, service: str, host: str, port: int) -> str:
        if host in self.services:
            return f"{LOOPBACK}:{self.port(host, port)}"
        if host in LOCAL_HOSTS:
            return f"{LOOPBACK}:{self.port(service, port)}"
        raise AssertionError(f"{service}: {host}:{port} names neither a service nor the container itself")

    def volume_dir(self, mount: Model) -> Path:
        if mount["type"] == "bind":
            return Path(mount["source"])
        path = self.workdir / "volumes" / mount["source"]
        path.mkdir(parents=True, exist_ok=True)
        return path

    def local_paths(self, service: str, value: str) -> str:
        """``value`` with the paths under ``service``'s volumes made paths of the test's directories."""
        for mount in self.services[service].get("volumes", []):
            target = re.escape(mount["target"].rstrip("/"))
            value = re.sub(rf"(^|,){target}(?=$|[,/])", _after_lead(str(self.volume_dir(mount))), value)
        return value

    def rewrite(self, service: str, key: str, value: str) -> str:
        """One ``KAFKA_*`` value with its addresses, ports and volume paths made local."""
        if key.endswith("_PORT") and value.isdigit():
            return str(self.port(service, int(value)))
        return _ADDRESS.sub(
            lambda m: m["lead"] + self.address(service, m["host"], int(m["port"])),
            self.local_paths(service, value),
        )

    def environment(self, service: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for key, value in container_environment(self.services[service]).items():
            env[key] = self.rewrite(service, key, value) if key.startswith("KAFKA_") else value
        if "KAFKA_ZOOKEEPER_CONNECT" in env:  # the test's chroot keeps tests apart on one ZooKeeper
            hosts, slash, chroot = env["KAFKA_ZOOKEEPER_CONNECT"].partition("/")
            env["KAFKA_ZOOKEEPER_CONNECT"] = hosts + self.zk_chroot + slash + chroot
        return env

    def argv(self, service: str) -> list[str]:
        """The service's command, local: this interpreter for the container's ``python``, volume paths
        made local, and ``service:port`` addresses of other services made loopback ones (an argument
        naming ``localhost`` means the compose host, as a client there sees it, and stays)."""

        def service_address(m: re.Match[str]) -> str:
            if m["host"] not in self.services:
                return m[0]
            return m["lead"] + self.address(service, m["host"], int(m["port"]))

        command = [unescaped(arg) for arg in self.services[service]["command"]]
        return [
            sys.executable
            if arg == "python"
            else _ADDRESS.sub(service_address, self.local_paths(service, arg))
            for arg in command
        ]

    def config_path(self, service: str) -> Path | None:
        """The properties file a daemon's command names with ``--config`` (local), if it names one."""
        argv = self.argv(service)
        return Path(argv[argv.index("--config") + 1]) if "--config" in argv else None

    @staticmethod
    def local_argv(argv: list[str]) -> list[str]:
        """The container's ``python`` is this interpreter, where the package is installed."""
        return [sys.executable if arg == "python" else arg for arg in argv]

    def zookeeper_config(self) -> dict[str, str]:
        """The zoo.cfg lines the ZooKeeper services add (the official image's ``ZOO_CFG_EXTRA``), local:
        volume paths made local and ``secureClientPort`` a loopback port of its own. For a local
        ZooKeeper's ``extra_config``; the ensemble's own lines (servers, ids) do not apply to it."""
        service = self.zookeeper[0]
        extra = container_environment(self.services[service]).get("ZOO_CFG_EXTRA", "")
        settings = dict(entry.split("=", 1) for entry in extra.split())
        settings = {key: self.local_paths(service, value) for key, value in settings.items()}
        if "secureClientPort" in settings:
            settings["secureClientPort"] = str(self.port(service, int(settings["secureClientPort"])))
            settings["secureClientPortAddress"] = LOOPBACK
        return settings

    def load(self, service: str) -> Any:
        """The daemon's configuration as its own loader reads it (environment and ``--config`` file)."""
        module = controller_config if daemon_module(self.services[service]) == "controller" else broker_config
        return module.load(self.config_path(service), self.environment(service))

    def log_dir(self, service: str) -> Path:
        """Where the daemon writes events.jsonl, read from its environment by its own config loader."""
        config = self.load(service)
        return (
            Path(config.log_dir) if isinstance(config, controller_config.ControllerConfig) else config.log_dir
        )

    # -- the cluster

    def run_once(self, service: str) -> str:
        """Run a one-shot service to completion; its output, or AssertionError when it fails."""
        directory = self.workdir / service
        directory.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")} | self.environment(service)
        result = subprocess.run(
            self.argv(service),
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=ONE_SHOT_TIMEOUT_S,
        )
        output = result.stdout + result.stderr
        (directory / f"{service}.log").write_text(output)
        assert result.returncode == 0, f"{service} exited with {result.returncode}:\n{output}"
        return output

    def start(self, start_zookeeper: StartZooKeeper | None = None) -> None:
        """Every service in start-up order: the local ZooKeeper where the ZooKeeper services come (by
        ``start_zookeeper``, if given), one-shot services run to completion, daemons started."""
        zookeeper_started = False
        for name in startup_order(self.model):
            if name in self.zookeeper and not zookeeper_started:
                zookeeper_started = True
                if start_zookeeper is not None:
                    start_zookeeper(self)
            elif name in one_shot_services(self.model):
                self.run_once(name)
            elif name in daemon_services(self.model):
                argv = self.argv(name)
                daemon = ComposeDaemon(name, self.workdir, argv, self.environment(name), self.log_dir(name))
                self.daemons[name] = daemon.start()

    def of_module(self, module: str) -> dict[str, ComposeDaemon]:
        return {name: d for name, d in self.daemons.items() if d.module == module}

    async def wait_until_up(self) -> tuple[ComposeDaemon, Event]:
        """Every daemon started, one controller through failover and aware of every broker."""
        controllers, brokers = self.of_module("controller"), self.of_module("broker")
        started = [d.wait_kind("controller_started", START_TIMEOUT_S) for d in controllers.values()]
        started += [d.wait_kind("broker_started", START_TIMEOUT_S) for d in brokers.values()]
        broker_events = await asyncio.gather(*started)
        broker_ids = {e["broker_id"] for e in broker_events if e["kind"] == "broker_started"}
        active, failover = await first_event(list(controllers.values()), "failover_complete")

        def knows_every_broker(e: Event) -> bool:
            if e["kind"] == "failover_complete":
                return e["brokers"] == len(broker_ids)
            return e["kind"] == "broker_change" and {int(b) for b in e["epochs"]} == broker_ids

        await active.wait_event(knows_every_broker, START_TIMEOUT_S, "the controller to see every broker")
        return active, failover

    def external_bootstrap(self, listener: str = "EXTERNAL") -> str:
        """The brokers' ``listener`` endpoints as advertised (what a client on the compose host uses)."""
        endpoints = []
        for broker in self.of_module("broker").values():
            started = broker.of_kind("broker_started")[-1]
            endpoints += [
                e.split("://", 1)[1] for e in started["listeners"] if e.startswith(f"{listener}://")
            ]
        return ",".join(endpoints)

    def healthcheck(self, service: str) -> subprocess.CompletedProcess[str]:
        """Run the service's healthcheck command here, with the service's (local) environment."""
        kind, *argv = self.services[service]["healthcheck"]["test"]
        assert kind == "CMD", f"{service}: only exec-form healthchecks can run locally"
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")} | self.environment(service)
        return subprocess.run(self.local_argv(argv), env=env, capture_output=True, text=True, timeout=30)

    def scrape(self, service: str) -> str:
        """The text of ``service``'s /metrics."""
        port = self.port(service, int(self.services[service]["environment"]["KAFKA_METRICS_PORT"]))
        return scrape_text(port)

    def kill(self) -> None:
        for daemon in self.daemons.values():
            daemon.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{d.tail(15)}" for name, d in self.daemons.items())


async def first_event(daemons: list[ComposeDaemon], kind: str) -> tuple[ComposeDaemon, Event]:
    """The first of ``daemons`` to write an event of ``kind``, with that event."""
    tasks = {asyncio.ensure_future(d.wait_kind(kind, START_TIMEOUT_S)): d for d in daemons}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        task = done.pop()
        return tasks[task], task.result()
    finally:
        for task in tasks:
            task.cancel()


@asynccontextmanager
async def running_compose(
    zk_connect: str,
    workdir: Path,
    *,
    files: tuple[Path, ...] = BASE_FILES,
    start_zookeeper: StartZooKeeper | None = None,
) -> AsyncIterator[LocalCompose]:
    """The daemons of ``files`` (docker-compose.yml alone by default) up on loopback against
    ``zk_connect``, after their one-shot services; killed on exit."""
    cluster = LocalCompose(compose_model(files), zk_connect, workdir)
    try:
        cluster.start(start_zookeeper)
        await cluster.wait_until_up()
        yield cluster
    except BaseException:
        print(cluster.logs())  # pytest shows it with the failure
        raise
    finally:
        cluster.kill()
