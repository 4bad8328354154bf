"""The cluster the client benchmarks run against: three broker processes and one controller around
the benchmark's ZooKeeper, and a topic whose leadership is spread over the brokers (RF 3)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.processes import BrokerProcess, ControllerProcess, Event
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

BROKERS = (1, 2, 3)


@dataclass
class ThreeBrokers:
    brokers: list[BrokerProcess]
    zk: AsyncZooKeeper

    @property
    def servers(self) -> str:
        return ",".join("{}:{}".format(*b.endpoint("PLAINTEXT")) for b in self.brokers)

    async def topic(self, name: str, partitions: int) -> dict[int, tuple[int, ...]]:
        """Create ``name`` and wait until every replica has taken its role; returns the assignment."""
        replicas = {p: tuple(BROKERS[(p + i) % 3] for i in range(3)) for p in range(partitions)}
        await create_topic(self.zk, name, replicas)
        for broker in self.brokers:
            for p in (p for p, r in replicas.items() if broker.broker_id in r):

                def took_role(event: Event, partition: int = p) -> bool:
                    return (
                        event["kind"] in ("become_leader", "become_follower")
                        and event.get("topic") == name
                        and event.get("partition") == partition
                    )

                await broker.wait_event(took_role, timeout=60)
        return replicas


@contextlib.asynccontextmanager
async def three_brokers(
    workdir: Path, zk_connect: str, **broker_settings: Any
) -> AsyncIterator[ThreeBrokers]:
    """Start the daemons, wait for the controller's failover, and stop everything afterwards."""
    brokers = [BrokerProcess(b, zk_connect, workdir, **broker_settings) for b in BROKERS]
    controller = ControllerProcess(1001, zk_connect, workdir)
    processes: list[Any] = [*brokers, controller]
    zk = AsyncZooKeeper(zk_connect)
    try:
        for process in processes:
            process.start()
        for broker in brokers:
            await broker.wait_kind("broker_started", timeout=60)
        await controller.wait_kind("failover_complete", timeout=60)
        await zk.start()
        yield ThreeBrokers(brokers, zk)
    finally:
        await zk.close()
        for process in processes:
            with contextlib.suppress(Exception):
                process.stop(timeout=60)
