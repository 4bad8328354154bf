"""A real cluster on loopback for process tests: ZooKeeper (from the fixture), a controller, brokers."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol import ApiKey
from protocol.record_batch import build_batch
from tests.daemons import BrokerProcess, ControllerProcess, create_topic
from tests.zkstore.helpers import session
from zkstore.aio import AsyncZooKeeper


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Cluster:
    def __init__(self, zk_connect: str, workdir: Path, admin: AsyncZooKeeper) -> None:
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.admin = admin
        self.brokers: dict[int, BrokerProcess] = {}
        self.controller: ControllerProcess | None = None
        self.processes: list[Any] = []

    def broker(self, broker_id: int, *, fixed_ports: bool = False, **overrides: Any) -> BrokerProcess:
        if fixed_ports:
            plain, control = free_ports(2)
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{control}"
        process = BrokerProcess(broker_id, self.zk_connect, self.workdir, **overrides)
        self.brokers[broker_id] = process
        self.processes.append(process)
        return process.start()

    def restart(self, broker_id: int) -> BrokerProcess:
        """The same broker (config, ports, log dir) as a new process."""
        old = self.brokers[broker_id]
        old.kill()
        new = BrokerProcess.__new__(BrokerProcess)
        new.__dict__.update(old.__dict__)
        new.process, new._read, new.events = None, 0, []
        new.events_path.rename(new.events_path.with_suffix(f".{len(self.processes)}.jsonl"))
        self.brokers[broker_id] = new
        self.processes.append(new)
        return new.start()

    async def start(
        self, broker_ids: tuple[int, ...] = (1, 2, 3), overrides: dict[int, dict[str, Any]] | None = None
    ) -> None:
        for broker_id in broker_ids:
            self.broker(broker_id, **(overrides or {}).get(broker_id, {}))
        for broker in self.brokers.values():
            await broker.wait_kind("broker_started")
        self.controller = ControllerProcess(100, self.zk_connect, self.workdir)
        self.processes.append(self.controller.start())
        await self.controller.wait_kind("failover_complete")

    async def topic(self, name: str, replicas: dict[int, tuple[int, ...]]) -> None:
        await create_topic(self.admin, name, replicas)
        for broker_id in {b for r in replicas.values() for b in r}:
            for partition in (p for p, r in replicas.items() if broker_id in r):
                await self.brokers[broker_id].wait_event(
                    lambda e, p=partition: (
                        e["kind"] in ("become_leader", "become_follower")
                        and e["topic"] == name
                        and e["partition"] == p
                    ),
                    what=f"{name}-{partition} on broker {broker_id}",
                )

    async def close(self) -> None:
        for process in self.processes:
            process.kill()
        await self.admin.close()


@pytest.fixture
async def cluster(zk_connect: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(zk_connect, tmp_path, await session(zk_connect))
    try:
        yield c
    finally:
        await c.close()


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
    reply = await broker.request("PLAINTEXT", ApiKey.PRODUCE, 7, body)
    (answer,) = reply["responses"][0]["partition_responses"]
    return answer
