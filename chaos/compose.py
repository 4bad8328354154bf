"""Chaos on a ``docker compose up`` cluster: the same schedule and verdict as on local processes, with
containers taken down by the engine instead of signals.

=========================  ==========================================================================
fault                      on the target's container
=========================  ==========================================================================
kill                       ``docker kill``, ``docker start`` after the hold
bounce                     ``docker kill`` and ``docker start`` at once
restart                    ``docker restart`` with the service's ``stop_grace_period``
pause                      ``docker pause`` past the session timeout, then ``docker unpause``
isolate                    ``docker network disconnect`` from every network, then connect again
zookeeper-restart          ``docker stop`` of a ZooKeeper server, ``docker start`` after the hold
zookeeper-leader-kill      ``docker kill`` of the ensemble's leader, ``docker start`` after the hold
quorum-loss                ``docker kill`` of two ZooKeeper servers, ``docker start`` after the hold
=========================  ==========================================================================

The run reaches ZooKeeper at its containers' addresses (the host routes to a bridge network's
containers; ZooKeeper is not published) and the brokers through their published ports. At the end,
each daemon's ``events.jsonl`` is copied out of its container (``docker cp``) to ``DIR/<service>/``,
where ``python -m pipeline audit --dir DIR`` finds it beside the runs, and each broker's log directory
is copied out to compare the replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import ChaosError
from chaos.faults import BACK_TIMEOUT_S, BrokerEpochs
from chaos.schedule import ENDING, EXPIRING, ZOOKEEPER_FAULTS, Node, Step
from chaos.target import RunInjector
from chaos.zookeeper_faults import describe, victims
from cluster import verify_replicas
from daemon.eventlog import EventLog
from deploy.compose import (
    Compose,
    addresses,
    daemon_role,
    disconnect,
    reconnect,
    session_timeout_s,
    status,
    stop_grace_s,
    zookeeper_id,
)
from deploy.engine import EngineError, docker
from zkserver.four_letter_words import server_mode
from zkstore import admin_session
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import Endpoint

__all__ = ["ComposeCluster", "ComposeInjector"]

log = logging.getLogger("chaos.compose")

CUTS = frozenset({"isolate"})
"""The one cut a container can suffer without tools inside it: off every network."""
UP = frozenset({"running", "healthy", "starting", "unhealthy"})
"""Container states of a running process (health aside)."""
ZOOKEEPER_STOP_S = 15
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1"})


@dataclass(frozen=True)
class Service:
    """A node of the compose cluster: the service's name (also the node's name in the run), its role,
    and what the run needs of its settings."""

    name: str
    role: str
    settings: dict[str, Any]

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.settings.get("environment") or {})

    def node(self) -> Node:
        timeout = session_timeout_s(self.settings) if self.role != "zookeeper" else None
        return Node(self.name, self.role, timeout)

    @property
    def broker_id(self) -> int:
        return int(self.environment["KAFKA_BROKER_ID"])

    def log_dir(self) -> str:
        """Where the daemon writes ``events.jsonl``: a broker's first log directory, a controller's
        ``log.dir``."""
        env = self.environment
        if self.role == "broker":
            dirs = env.get("KAFKA_LOG_DIRS") or f"/tmp/kafka-logs-{self.broker_id}"
            return dirs.split(",")[0]
        if not env.get("KAFKA_LOG_DIR"):
            raise ChaosError(f"{self.name} sets no KAFKA_LOG_DIR: the controller keeps no event log")
        return env["KAFKA_LOG_DIR"]

    def client_endpoint(self) -> tuple[str, int]:
        """The broker's advertised endpoint on this machine (a ``localhost`` one, its port published)."""
        for text in self.environment.get("KAFKA_ADVERTISED_LISTENERS", "").split(","):
            endpoint = Endpoint.parse(text.strip())
            if endpoint.host in LOCAL_HOSTS:
                return endpoint.host, endpoint.port
        raise ChaosError(f"{self.name} advertises no localhost listener: clients here cannot reach it")


class ComposeCluster:
    """The compose project ``compose`` names, running; its runs and logs go to ``directory``."""

    def __init__(self, directory: Path, compose: Compose) -> None:
        self.directory = directory.resolve()
        self.compose = compose
        model = compose.model()
        self.project = str(compose.project or model["name"])
        self.services = _services(model["services"])
        if not any(s.role == "broker" for s in self.services.values()):
            raise ChaosError(f"{', '.join(map(str, compose.files))}: no broker service")
        _plaintext_only(self.services.values())
        states = compose.states()
        missing = [name for name in self.services if states.get(name) not in UP]
        if missing:
            files = " ".join(f"-f {f}" for f in compose.files)
            raise ChaosError(
                f"the compose project {self.project} is not running ({', '.join(missing)} not up): "
                f"start it with `docker compose -p {self.project} {files} up -d`"
            )
        self._containers = {name: compose.container(name) for name in self.services}
        self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def cuts(self) -> frozenset[str]:
        return CUTS

    def nodes(self) -> list[Node]:
        return [service.node() for service in self.services.values()]

    def container(self, name: str) -> str:
        return self._containers[name]

    def brokers(self) -> list[Service]:
        return [s for s in self.services.values() if s.role == "broker"]

    def bootstrap_servers(self) -> str:
        published = [
            f"localhost:{port['published']}"
            for broker in self.brokers()
            for port in broker.settings.get("ports") or []
            if port.get("published")
        ]
        if not published:
            raise ChaosError("no broker publishes a port: clients on this machine cannot reach the cluster")
        return ",".join(published)

    def zookeeper_connect(self) -> str:
        """The daemons' ``zookeeper.connect`` with each ZooKeeper service's name replaced by its
        container's address, which the host can reach."""
        connect = next(s for s in self.brokers()).environment["KAFKA_ZOOKEEPER_CONNECT"]
        hosts, slash, chroot = connect.partition("/")
        resolved = []
        for host_port in hosts.split(","):
            host, _, port = host_port.strip().rpartition(":")
            service = self._service_named(host)
            if service is None:
                raise ChaosError(f"zookeeper.connect names {host}, which is no service of {self.project}")
            found = addresses(self.container(service.name))
            if not found:
                raise ChaosError(f"{service.name} has no address on any network")
            resolved.append(f"{found[0]}:{port}")
        return ",".join(resolved) + slash + chroot

    def _service_named(self, host: str) -> Service | None:
        return next(
            (s for s in self.services.values() if host in (s.name, s.settings.get("hostname"))),
            None,
        )

    def zookeeper_session(self) -> contextlib.AbstractAsyncContextManager[AsyncZooKeeper]:
        return admin_session.connect(self.zookeeper_connect())

    def zookeeper_leader(self) -> str | None:
        """The ZooKeeper service whose server says it leads (or serves alone), or None."""
        for address in self.zookeeper_connect().partition("/")[0].split(","):
            host, _, port = address.rpartition(":")
            if server_mode(host, int(port), timeout=2.0) in ("leader", "standalone"):
                return next(
                    (
                        s.name
                        for s in self.services.values()
                        if s.role == "zookeeper" and host in addresses(self.container(s.name))
                    ),
                    None,
                )
        return None

    def injector(self, events: EventLog, zk: AsyncZooKeeper) -> RunInjector:
        return ComposeInjector(self, events, zk)

    async def verify_replicas(self, topics: Sequence[str]) -> list[verify_replicas.PartitionReport]:
        """The brokers' log directories copied out of their containers, compared as on local disks."""
        with tempfile.TemporaryDirectory(prefix="chaos-replicas-") as tmp:
            dirs: dict[int, list[Path]] = {}
            for broker in self.brokers():
                copy = Path(tmp) / broker.name
                source = f"{self.container(broker.name)}:{broker.log_dir()}"
                await asyncio.to_thread(docker, "cp", source, str(copy))
                dirs[broker.broker_id] = [copy]
            endpoints = {b.broker_id: b.client_endpoint() for b in self.brokers()}
            async with self.zookeeper_session() as zk:
                return await verify_replicas.verify_logs(zk, topics, endpoints, dirs)

    def daemon_events(self) -> list[Path]:
        """Each daemon's ``events.jsonl`` copied to ``DIR/<service>/events.jsonl`` (replacing an older
        copy: the container's log holds the whole history)."""
        paths = []
        for service in self.services.values():
            if service.role == "zookeeper":
                continue
            target = self.directory / service.name / "events.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            source = f"{self.container(service.name)}:{service.log_dir()}/events.jsonl"
            try:
                docker("cp", source, str(target))
            except EngineError as exc:
                log.warning("could not copy %s's event log: %s", service.name, exc)
                continue
            paths.append(target)
        return paths


def _services(services: dict[str, Any]) -> dict[str, Service]:
    """The project's nodes: controllers, brokers and ZooKeeper servers, by service name."""
    nodes = {}
    for name, settings in services.items():
        role = daemon_role(settings) or ("zookeeper" if zookeeper_id(settings) is not None else None)
        if role is not None:
            nodes[name] = Service(name, role, settings)
    return nodes


def _plaintext_only(services: Iterable[Service]) -> None:
    """The run's clients and ZooKeeper session carry no credentials: refuse a secured project."""
    for service in services:
        env = service.environment
        secured = any(p in env.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "") for p in ("SSL", "SASL"))
        if secured or env.get("KAFKA_ZOOKEEPER_SSL_CLIENT_ENABLE", "").lower() == "true":
            raise ChaosError(
                f"{service.name} is secured (TLS or SASL): chaos on compose runs on the plaintext "
                "docker-compose.yml only"
            )


class ComposeInjector:
    """Faults on the containers of a :class:`ComposeCluster`, recorded in the run's events."""

    def __init__(self, cluster: ComposeCluster, events: EventLog, zk: AsyncZooKeeper) -> None:
        self.cluster = cluster
        self.events = events
        self.crashed: list[str] = []
        self._epochs = BrokerEpochs(zk)
        self._paused: dict[str, float] = {}
        self._cut: dict[str, dict[str, Any]] = {}
        self._zookeeper_down: list[str] = []

    async def _docker(self, *args: str) -> str:
        return (await asyncio.to_thread(docker, *args)).stdout

    def _emit(self, kind: str, step: Step, fault: str | None = None, detail: str | None = None) -> None:
        fields: dict[str, Any] = {"fault": fault or step.fault, "target": step.target, "role": step.role}
        if detail is not None:
            fields["detail"] = detail
            log.info("%s %s: %s", fields["fault"], step.target, detail)
        self.events.emit(kind, **fields)

    async def inject(self, step: Step) -> bool:
        service = self.cluster.services[step.target]
        container = self.cluster.container(step.target)
        if service.role == "broker" and (step.fault in ENDING or step.fault in EXPIRING):
            await self._epochs.remember(step.target, service.broker_id)
        if step.fault in ZOOKEEPER_FAULTS:
            detail = await self._zookeeper_down_for(step)
        else:
            if await asyncio.to_thread(status, container) not in UP:
                await self._crashed(step.target, step.role, container)
                await self.settle(step)
                return False
            detail = await self._take_down(step, service, container)
        self._emit("fault_injected", step, detail=detail)
        return True

    async def _take_down(self, step: Step, service: Service, container: str) -> str:
        name = f"{step.target} ({container[:12]})"
        if step.fault == "kill":
            await self._docker("kill", container)
            return f"docker kill {name}; docker start after {step.hold_s:g} s"
        if step.fault == "bounce":
            await self._docker("kill", container)
            await self._docker("start", container)
            return f"docker kill {name} and docker start at once"
        if step.fault == "restart":
            grace = stop_grace_s(service.settings)
            await self._docker("restart", "--time", f"{grace:.0f}", container)
            return f"docker restart {name} (SIGTERM, up to {grace:g} s to exit, start again)"
        if step.fault == "pause":
            await self._docker("pause", container)
            self._paused[step.target] = time.monotonic()
            return f"docker pause {name} for {step.hold_s:g} s"
        if step.fault == "isolate":
            self._cut[step.target] = await asyncio.to_thread(disconnect, container)
            networks = ", ".join(self._cut[step.target])
            return f"docker network disconnect {name} from {networks} for {step.hold_s:g} s"
        raise ChaosError(f"{step.fault} cannot be done to a container")

    async def _zookeeper_down_for(self, step: Step) -> str:
        servers = [s.name for s in self.cluster.services.values() if s.role == "zookeeper"]
        leader = None
        if step.fault == "zookeeper-leader-kill":
            leader = await asyncio.to_thread(self.cluster.zookeeper_leader)
        self._zookeeper_down = victims(step, servers, leader)
        for name in self._zookeeper_down:
            container = self.cluster.container(name)
            if step.fault == "zookeeper-restart":
                await self._docker("stop", "--time", str(ZOOKEEPER_STOP_S), container)
            else:
                await self._docker("kill", container)
        return describe(step, self._zookeeper_down)

    async def heal(self, step: Step) -> None:
        container = self.cluster.container(step.target)
        if step.fault in ZOOKEEPER_FAULTS:
            await self._start_zookeeper()
        elif step.fault == "kill":
            await self._docker("start", container)
        elif step.fault == "pause" and step.target in self._paused:
            await self._unpause(step)
            return  # _unpause recorded the healing
        elif step.fault == "isolate" and step.target in self._cut:
            await asyncio.to_thread(reconnect, container, self._cut.pop(step.target))
        else:
            return  # bounce and restart undo themselves
        log.info("healed %s of %s", step.fault, step.target)
        self._emit("fault_healed", step)

    async def _unpause(self, step: Step) -> None:
        since = self._paused.pop(step.target)
        detail = f"docker unpause after {time.monotonic() - since:.1f} s"
        self._emit("fault_injected", step, fault="resume", detail=detail)
        await self._docker("unpause", self.cluster.container(step.target))
        self._emit("fault_healed", step)

    async def _start_zookeeper(self) -> None:
        down, self._zookeeper_down = self._zookeeper_down, []
        for name in down:  # all started before any is waited for: two are needed for a quorum
            await self._docker("start", self.cluster.container(name))

    async def heal_all(self) -> None:
        """Every container back on its networks, started and unpaused; one found down that no fault
        took down is noted as crashed and started."""
        for name in list(self._cut):
            await asyncio.to_thread(reconnect, self.cluster.container(name), self._cut.pop(name))
        await self._start_zookeeper()
        for name, service in self.cluster.services.items():
            container = self.cluster.container(name)
            state = await asyncio.to_thread(status, container)
            if state == "paused":
                if name in self._paused:
                    await self._unpause(Step(0, "pause", name, service.role, 0))
                else:
                    log.warning("%s was paused; unpausing it", name)
                    await self._docker("unpause", container)
            elif state not in UP:
                await self._crashed(name, service.role, container)

    async def _crashed(self, name: str, role: str, container: str) -> None:
        """A container down that no fault took down: noted (the audit's timeline must see it) and
        started again."""
        log.warning("%s is not running (its container exited on its own; see its logs): starting it", name)
        self.events.emit("node_crashed", target=name, role=role, container=container)
        self.crashed.append(name)
        await self._docker("start", container)

    async def settle(self, step: Step) -> None:
        """A broker is back once registered with a new epoch; a controller taken down, once its new
        process answers its healthcheck (it competes for ``/controller`` from then on)."""
        service = self.cluster.services[step.target]
        if step.role == "broker":
            await self._epochs.wait_new(step, service.broker_id)
        elif step.role == "controller" and step.fault in ENDING:
            await self._healthy(step)

    async def _healthy(self, step: Step) -> None:
        container = self.cluster.container(step.target)
        started = time.monotonic()
        while time.monotonic() - started < BACK_TIMEOUT_S:
            if await asyncio.to_thread(status, container) in ("healthy", "running"):
                log.info("%s is competing again after %.1f s", step.target, time.monotonic() - started)
                return
            await asyncio.sleep(0.5)
        log.warning(
            "%s is not healthy %.0f s after its %s; going on", step.target, BACK_TIMEOUT_S, step.fault
        )
