"""docker-compose.yml's controllers and brokers, run as local processes, make a working cluster.

Each daemon service runs with its compose command and environment, the compose network folded onto
loopback (see :mod:`tests.support.local_compose`), against the session's ZooKeeper. Waits are on the
daemons' event logs, never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.clients import confluent_round_trip
from tests.support.compose import compose_model, daemon_services
from tests.support.local_compose import LOOPBACK, LocalCompose, running_compose
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

pytestmark = pytest.mark.zookeeper

TOPIC = "compose-round-trip"
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
"""Three replicas each, so followers replicate over the INTERNAL listener and acks=all needs them."""


@pytest.fixture
async def cluster(zk_connect: str, tmp_path: Path) -> AsyncIterator[LocalCompose]:
    async with running_compose(zk_connect, tmp_path) as cluster:
        yield cluster


def test_addresses_ports_and_volumes_map_consistently(tmp_path: Path) -> None:
    local = LocalCompose(compose_model(), "127.0.0.1:2181/chroot", tmp_path)
    broker = local.environment("broker-1")
    listeners = dict(item.split("://") for item in broker["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in broker["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert listeners == advertised, "a listener and its advertised endpoint are the same local address"
    assert all(address.startswith(f"{LOOPBACK}:") for address in listeners.values())
    assert len(set(listeners.values())) == 3
    assert broker["KAFKA_ZOOKEEPER_CONNECT"] == "127.0.0.1:2181,127.0.0.1:2181,127.0.0.1:2181/chroot"
    assert broker["KAFKA_LOG_DIRS"] == str(tmp_path / "volumes" / "broker-1-data" / "data")
    controller = local.environment("controller-1001")
    assert controller["KAFKA_LISTENERS"] == controller["KAFKA_ADVERTISED_LISTENERS"]
    metrics_ports = {local.environment(name)["KAFKA_METRICS_PORT"] for name in daemon_services(local.model)}
    assert len(metrics_ports) == len(daemon_services(local.model)), "7071 in each container: distinct here"


async def test_the_compose_cluster_comes_up_and_serves_clients_on_the_published_listeners(
    cluster: LocalCompose, zk_connect: str
) -> None:
    controllers = cluster.of_module("controller")
    brokers = cluster.of_module("broker")
    elected = {name: d.of_kind("controller_elected") for name, d in controllers.items()}
    assert sum(len(events) for events in elected.values()) == 1, elected

    zk = AsyncZooKeeper(zk_connect, session_timeout_ms=6000)
    await zk.start()
    try:
        assert {int(i) for i in await zk.get_children(znodes.BROKER_IDS)} == {1, 2, 3}
        data, _ = await zk.get(znodes.CONTROLLER)
        registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
        active = next(name for name, events in elected.items() if events)
        assert registration is not None
        assert registration.broker_id == controllers[active].of_kind("controller_started")[0]["controller_id"]

        for name in daemon_services(cluster.model):
            result = cluster.healthcheck(name)
            assert result.returncode == 0, f"{name} healthcheck: {result.stderr}"

        await create_topic(zk, TOPIC, ASSIGNMENT)
        leaders = {f"broker-{replicas[0]}": partition for partition, replicas in ASSIGNMENT.items()}
        for name, partition in leaders.items():
            await brokers[name].wait_kind("become_leader", topic=TOPIC, partition=partition)
    finally:
        await zk.close()

    records = [(i % 3, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(300)]
    loop = asyncio.get_running_loop()
    got = await loop.run_in_executor(None, confluent_round_trip, cluster.external_bootstrap(), TOPIC, records)
    by_partition: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for partition, key, value in got:
        by_partition[partition].append((key, value))
    for partition in ASSIGNMENT:
        assert by_partition[partition] == [(k, v) for p, k, v in records if p == partition]
