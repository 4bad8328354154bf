"""Idempotent producers against real brokers: producer ids from ZooKeeper blocks, retries stored once
(also by a new leader after a failover), and Kafka's sequence and epoch errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cluster.processes import BrokerProcess
from protocol import ApiKey, ErrorCode
from protocol.record_batch import build_batch
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore.producer_id_blocks import PRODUCER_ID_BLOCK_PATH

pytestmark = pytest.mark.zookeeper

TOPIC = "idempotent"


async def init_producer_id(broker: BrokerProcess, transactional_id: str | None = None) -> dict[str, Any]:
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}  # fmt: skip
    return await broker.request("PLAINTEXT", ApiKey.INIT_PRODUCER_ID, 4, body)


async def produce_batch(broker: BrokerProcess, batch: bytes, partition: int = 0) -> dict[str, Any]:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 15000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
    }
    reply = await broker.request("PLAINTEXT", ApiKey.PRODUCE, 8, body)
    (answer,) = reply["responses"][0]["partition_responses"]
    return answer


def batch(producer_id: int, epoch: int, sequence: int, count: int = 3) -> bytes:
    records = [(None, f"p{producer_id}-e{epoch}-s{sequence + i}".encode()) for i in range(count)]
    return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


async def test_producer_ids_come_from_blocks_no_two_brokers_share(cluster: Cluster) -> None:
    await cluster.start((1, 2))
    first = [await init_producer_id(cluster.brokers[b]) for b in (1, 2, 1, 2)]
    assert [r["error_code"] for r in first] == [ErrorCode.NONE] * 4
    assert [r["producer_epoch"] for r in first] == [0] * 4
    ids = [r["producer_id"] for r in first]
    assert len(set(ids)) == 4
    data, _ = await cluster.admin.get(PRODUCER_ID_BLOCK_PATH)
    block = json.loads(data)
    assert block["version"] == 1 and isinstance(block["block_start"], str)
    # the two brokers hold consecutive blocks of 1000: 0-999 and 1000-1999
    assert sorted({i // 1000 for i in ids}) == [0, 1]
    assert int(block["block_end"]) == 1999


async def test_a_retried_batch_is_stored_once_also_by_a_new_leader(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    await cluster.topic(TOPIC, {0: (1, 2, 3)})
    leader = cluster.brokers[1]
    producer_id = (await init_producer_id(leader))["producer_id"]
    first = await produce_batch(leader, batch(producer_id, 0, 0))
    again = await produce_batch(leader, batch(producer_id, 0, 0))
    assert (first["error_code"], again["error_code"]) == (ErrorCode.NONE, ErrorCode.NONE)
    assert again["base_offset"] == first["base_offset"] == 0
    second = await produce_batch(leader, batch(producer_id, 0, 3))
    assert second["base_offset"] == 3

    # the followers built the producer's state from what they replicated: after the leader dies, the
    # new leader recognises the retry of the last batch too
    leader.kill()

    async def new_leader() -> int | None:
        state, _ = await partition_state(cluster.admin, TOPIC, 0)
        return state.leader if state.leader in (2, 3) else None

    successor = cluster.brokers[
        await wait_until(new_leader, what="a new leader of the partition", timeout=30)
    ]
    retried = await _until_led(successor, batch(producer_id, 0, 3))
    assert (retried["error_code"], retried["base_offset"]) == (ErrorCode.NONE, 3)
    third = await produce_batch(successor, batch(producer_id, 0, 6))
    assert third["base_offset"] == 6


async def _until_led(broker: BrokerProcess, data: bytes) -> dict[str, Any]:
    """Produce until the broker has taken its LeaderAndIsr (NOT_LEADER_OR_FOLLOWER before)."""
    async with asyncio.timeout(30):
        while True:
            answer = await produce_batch(broker, data)
            if answer["error_code"] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                return answer
            await asyncio.sleep(0.1)


async def test_sequence_gaps_and_old_epochs_are_refused(cluster: Cluster) -> None:
    await cluster.start((1,))
    await cluster.topic(TOPIC, {0: (1,)})
    broker = cluster.brokers[1]
    producer_id = (await init_producer_id(broker))["producer_id"]
    assert (await produce_batch(broker, batch(producer_id, 1, 0)))["error_code"] == ErrorCode.NONE
    gap = await produce_batch(broker, batch(producer_id, 1, 10))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    stale = await produce_batch(broker, batch(producer_id, 0, 3))
    assert stale["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    bump_without_reset = await produce_batch(broker, batch(producer_id, 2, 3))
    assert bump_without_reset["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await produce_batch(broker, batch(producer_id, 1, 3)))["base_offset"] == 3


async def test_confluent_idempotent_producer_at_defaults(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    await cluster.topic(TOPIC, {0: (1, 2, 3), 1: (2, 3, 1)})
    servers = ",".join("{}:{}".format(*b.endpoint("PLAINTEXT")) for b in cluster.brokers.values())

    def produce() -> int:
        from confluent_kafka import Producer

        failures: list[str] = []
        producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})

        def delivered(err: Any, _: Any) -> None:
            if err is not None:
                failures.append(str(err))

        for i in range(500):
            producer.produce(TOPIC, value=f"c{i}".encode(), partition=i % 2, on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(60)
        assert not failures and not remaining, failures[:3]
        return 500

    assert await asyncio.to_thread(produce) == 500
