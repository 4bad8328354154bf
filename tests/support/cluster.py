"""One cluster fixture for process tests: daemons on loopback around the test's ZooKeeper chroot.

A test takes what it needs: real broker processes (``start`` brings up brokers and a controller and
waits for failover), simulated brokers (``start_simulated``, for driving controller processes), and
controller processes (``start_controller``). Everything is killed at the end, whatever happened.

A module marked ``secure_variant`` runs each test twice: on PLAINTEXT, and on the secured layout of
``cluster.secure`` (mutual TLS on every node's listener, ACLs, ZooKeeper ACLs), where the test acts as
the super user ``admin`` through its client certificate, on the brokers' INTERNAL (SSL) listener.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cluster.processes import BrokerProcess, ControllerProcess, DaemonProcess, Event
from cluster.secure import SecureCluster
from protocol import ApiKey
from protocol.record_batch import build_batch
from tests.support.broker_sim import Received, SimulatedBroker
from tests.support.zookeeper import session
from zkserver.ports import free_ports
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

__all__ = [
    "SECURITY_MODES",
    "Cluster",
    "channel_idle",
    "cluster",
    "epoch_of",
    "from_epoch",
    "produce",
]

DEFAULT_CONTROLLER_ID = 1001


SECURITY_MODES = ("plaintext", "ssl")
"""The ``cluster`` fixture's variants in a module marked ``secure_variant``."""


class Cluster:
    def __init__(
        self, zk_connect: str, workdir: Path, admin: AsyncZooKeeper, secure: SecureCluster | None = None
    ) -> None:
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.admin = admin
        self.secure = secure
        """The secured layout's CA and settings, or None on PLAINTEXT."""
        self.client_keystore = secure.keystore("admin", unit="clients") if secure is not None else None
        """The test's own certificate in a secured cluster: ``User:admin``, a super user."""
        self.client_security = secure.dialing(self.client_keystore) if secure is not None else None
        self.brokers: dict[int, BrokerProcess] = {}
        """Real broker processes."""
        self.simulated: dict[int, SimulatedBroker] = {}
        self.controllers: list[ControllerProcess] = []
        self.controller: ControllerProcess | None = None
        """The controller ``start`` started."""
        self.processes: list[DaemonProcess] = []

    # -- real brokers

    @property
    def client_listener(self) -> str:
        """The brokers' listener a test's client uses: PLAINTEXT, or INTERNAL (SSL) when secured."""
        return "INTERNAL" if self.secure is not None else "PLAINTEXT"

    def bootstrap(self) -> str:
        return ",".join("{}:{}".format(*b.endpoint(self.client_listener)) for b in self.brokers.values())

    def client_config(self) -> dict[str, str]:
        """confluent-kafka settings reaching the brokers as the test's client."""
        config = {"bootstrap.servers": self.bootstrap()}
        if self.secure is not None:
            config |= {
                "security.protocol": "SSL",
                "ssl.ca.location": str(self.secure.ca.certificate),
                "ssl.certificate.location": str(self.client_keystore),
                "ssl.key.location": str(self.client_keystore),
            }
        return config

    def kafka_python_config(self) -> dict[str, Any]:
        """kafka-python settings reaching the brokers as the test's client."""
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap()}
        if self.secure is not None:
            config |= {
                "security_protocol": "SSL",
                "ssl_cafile": str(self.secure.ca.certificate),
                "ssl_certfile": str(self.client_keystore),
            }
        return config

    def _adopt(self, process: DaemonProcess) -> None:
        process.client_security = self.client_security
        if isinstance(process, BrokerProcess):
            process.client_listener = self.client_listener
        self.processes.append(process)

    def broker(self, broker_id: int, *, fixed_ports: bool = False, **overrides: Any) -> BrokerProcess:
        if self.secure is not None:
            client, internal, control = free_ports(3) if fixed_ports else (0, 0, 0)
            ports = (client, internal, control)
            overrides = {**self.secure.broker(broker_id, ports=ports), **overrides}
        elif fixed_ports:
            plain, control = free_ports(2)
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{control}"
        process = BrokerProcess(broker_id, self.zk_connect, self.workdir, **overrides)
        self.brokers[broker_id] = process
        self._adopt(process)
        return process.start()

    def restart(self, broker_id: int) -> BrokerProcess:
        """The same broker (config, ports, log dir) as a new process."""
        old = self.brokers[broker_id]
        old.kill()
        new = old.relaunch(generation=len(self.processes))
        self.brokers[broker_id] = new
        self.processes.append(new)
        return new.start()

    async def start(
        self, broker_ids: tuple[int, ...] = (1, 2, 3), overrides: dict[int, dict[str, Any]] | None = None
    ) -> None:
        """Real brokers, then one controller; returns once the controller has finished failover."""
        for broker_id in broker_ids:
            self.broker(broker_id, **(overrides or {}).get(broker_id, {}))
        for broker in self.brokers.values():
            await broker.wait_kind("broker_started")
        self.controller = self.start_controller(DEFAULT_CONTROLLER_ID)
        await self.controller.wait_kind("failover_complete")

    async def topic(self, name: str, replicas: dict[int, tuple[int, ...]]) -> None:
        """Create a topic and wait until each real broker has taken its role for each partition."""
        await create_topic(self.admin, name, replicas)
        for broker_id in {b for r in replicas.values() for b in r}:
            for p in (p for p, r in replicas.items() if broker_id in r):
                await self.brokers[broker_id].wait_event(
                    partial(_took_role, topic=name, partition=p), what=f"{name}-{p} on broker {broker_id}"
                )

    # -- simulated brokers and controllers

    async def start_simulated(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            broker = SimulatedBroker(broker_id, self.zk_connect, secure=self.secure)
            await broker.start()
            self.simulated[broker_id] = broker

    def start_controller(self, controller_id: int, **overrides: object) -> ControllerProcess:
        if self.secure is not None:
            overrides = {**self.secure.controller(controller_id), **overrides}
        process = ControllerProcess(controller_id, self.zk_connect, self.workdir, **overrides)
        self.controllers.append(process)
        self._adopt(process)
        return process.start()

    async def topic_id(self, topic: str) -> object:
        data, _ = await self.admin.get(znodes.topic_path(topic))
        assignment = znodes.decode_topic_assignment(data, znodes.topic_path(topic))
        assert assignment is not None and assignment.topic_id is not None
        return assignment.topic_id

    async def close(self) -> None:
        for process in self.processes:
            process.kill()
        for simulated in self.simulated.values():
            await simulated.stop()
        await self.admin.close()


def _took_role(event: Event, *, topic: str, partition: int) -> bool:
    return (
        event["kind"] in ("become_leader", "become_follower")
        and event["topic"] == topic
        and event["partition"] == partition
    )


@pytest.fixture
async def cluster(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """PLAINTEXT daemons, or (parametrized ``ssl`` by ``secure_variant``) the secured layout."""
    secure = SecureCluster.create(tmp_path / "secrets") if getattr(request, "param", None) == "ssl" else None
    admin = await session(zk_connect, secure.zk_security if secure is not None else None)
    if secure is not None:
        # The chroot holds /controller: like a secured root, it must not be world-writable.
        await admin.set_acls("/", admin.acls_for(znodes.CONTROLLER))
    c = Cluster(zk_connect, tmp_path, admin, secure)
    try:
        yield c
    finally:
        await c.close()


def from_epoch(api_key: int, controller_epoch: int) -> Callable[[Received], bool]:
    """A simulated broker's received request of ``api_key`` from the controller of ``controller_epoch``."""
    return lambda r: r.api_key == api_key and r.body["controller_epoch"] == controller_epoch


async def channel_idle(controller: ControllerProcess, broker_id: int) -> None:
    """Wait until every request the controller sent to ``broker_id`` has been answered."""

    def idle(_: dict[str, Any]) -> bool:
        events = [e for e in controller.poll_events() if e.get("broker") == broker_id]
        sent = {e["correlation_id"] for e in events if e["kind"] == "request_sent"}
        answered = {e["correlation_id"] for e in events if e["kind"] == "response_received"}
        return sent <= answered

    if not idle({}):
        await controller.wait_event(idle, what=f"no request in flight to broker {broker_id}")


def epoch_of(broker: BrokerProcess) -> int:
    return next(e for e in reversed(broker.poll_events()) if e["kind"] == "registered")["broker_epoch"]


async def produce(
    broker: BrokerProcess, topic: str, partition: int, count: int, *, acks: int = -1, timeout_ms: int = 20000
) -> dict[str, Any]:
    """Produce ``count`` small records to ``topic``-``partition`` on ``broker`` (its leader) in one batch."""
    records = build_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(count)], 0)
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    reply = await broker.request(broker.client_listener, ApiKey.PRODUCE, 7, body)
    (answer,) = reply["responses"][0]["partition_responses"]
    return answer
