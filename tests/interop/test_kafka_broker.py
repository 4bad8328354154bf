"""A real Kafka 3.9 broker in the project's ZooKeeper, seen by the project's znode readers and controller."""

from __future__ import annotations

import asyncio

from kafkapeer.broker import KafkaBroker
from tests.interop.conftest import KafkaBrokers
from tests.support.cluster import Cluster
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

REGISTRATION_TIMEOUT_S = 90.0


async def registration(zk: AsyncZooKeeper, broker: KafkaBroker) -> tuple[znodes.BrokerRegistration, int]:
    """Kafka's own ``/brokers/ids/N`` through our decoder, with its czxid; waits for it to appear."""
    path = f"{znodes.BROKER_IDS}/{broker.broker_id}"
    deadline = asyncio.get_running_loop().time() + REGISTRATION_TIMEOUT_S
    while True:
        broker.check_running()
        stat = await zk.exists(path)
        if stat is not None:
            data, stat = await zk.get(path)
            decoded = znodes.decode_broker_registration(data, path)
            assert decoded is not None, f"our reader refused Kafka's registration: {data!r}"
            return decoded, stat.czxid
        assert asyncio.get_running_loop().time() < deadline, (
            f"{broker.name} never registered:\n{broker.tail()}"
        )
        await asyncio.sleep(0.2)


async def test_a_kafka_39_broker_registers_json_our_reader_decodes(
    kafka: KafkaBrokers, zk: AsyncZooKeeper
) -> None:
    broker = kafka.broker(0)
    decoded, czxid = await registration(zk, broker)
    assert decoded.broker_id == 0
    (endpoint,) = decoded.endpoints
    assert (endpoint.listener_name, endpoint.host) == ("PLAINTEXT", "127.0.0.1")
    assert decoded.listener_security_protocol_map["PLAINTEXT"] == "PLAINTEXT"
    assert czxid > 0


async def test_our_controller_sees_a_kafka_broker_join_die_and_come_back_with_a_new_epoch(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """KIP-380 across implementations: Kafka's registration czxid is the epoch our controller tracks."""
    controller = cluster.start_controller(1001, inter_broker_protocol_version="2.2")
    await controller.wait_kind("controller_elected", timeout=60)
    broker = kafka.broker(0)
    _, first_epoch = await registration(zk, broker)
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and e.get("epochs", {}).get("0") == first_epoch,
        timeout=60,
        what=f"broker 0 new with epoch {first_epoch}",
    )
    broker.kill()
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and 0 in e.get("dead", []), timeout=60, what="broker 0 dead"
    )
    broker.start()
    _, second_epoch = await registration(zk, broker)
    assert second_epoch > first_epoch
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and e.get("epochs", {}).get("0") == second_epoch,
        timeout=60,
        what=f"broker 0 back with epoch {second_epoch}",
    )
