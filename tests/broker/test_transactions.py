"""Transactions with real clients at their defaults: a transactional producer's commits and aborts read
back with read_committed and read_uncommitted, a producer fenced by a newer one with the same
transactional id, and a consume-transform-produce loop committing its offsets in its transactions.

Three brokers with a small ``__transaction_state`` (four partitions) and ``__consumer_offsets`` (six),
so they start fast; everything else at Kafka's defaults (RF 3, ``min.insync.replicas`` 2 for the
transaction log). Each client runs in a thread with its own deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster

pytestmark = pytest.mark.zookeeper

SETTINGS = {
    "offsets_topic_num_partitions": 6,
    "transaction_state_log_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 200,
}
PARTITIONS = 3
REPLICATED = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(PARTITIONS)}


async def start(cluster: Cluster, *topics: str) -> str:
    await cluster.start((1, 2, 3), overrides=dict.fromkeys((1, 2, 3), SETTINGS))
    for topic in topics:
        await cluster.topic(topic, REPLICATED)
    return cluster.bootstrap()


def read_all(servers: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    """Every value of ``topic`` a fresh consumer with ``isolation.level`` sees, waiting until it has at
    least ``expected`` values and then until one more poll brings nothing new."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"reader-{isolation}-{topic}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    until = time.monotonic() + DEADLINE_S
    quiet = 0
    try:
        while time.monotonic() < until:
            message = consumer.poll(0.5)
            if message is None:
                quiet += 1
                if len(values) >= expected and quiet >= 4:
                    return values
                continue
            if message.error():
                raise RuntimeError(str(message.error()))
            quiet = 0
            values.append(message.value())
        raise TimeoutError(f"{isolation}: {len(values)} of {expected} values within {DEADLINE_S} s")
    finally:
        consumer.close()


def transactional_round(servers: str, topic: str, transactional_id: str) -> None:
    """Commit ``c0..c9``, abort ``a0..a9``, commit ``d0..d4``, each spread over the partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id})
    producer.init_transactions(DEADLINE_S)
    for prefix, count, commit in (("c", 10, True), ("a", 10, False), ("d", 5, True)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=f"{prefix}{i}".encode(), partition=i % PARTITIONS)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.flush(DEADLINE_S)  # the aborted records are in the log before the abort
            producer.abort_transaction(DEADLINE_S)


async def test_confluent_kafka_commits_and_aborts_read_back_in_both_isolation_levels(
    cluster: Cluster,
) -> None:
    servers = await start(cluster, "payments")
    await asyncio.to_thread(transactional_round, servers, "payments", "payments-tx")
    committed = await asyncio.to_thread(read_all, servers, "payments", "read_committed", 15)
    assert sorted(committed) == sorted(
        [f"c{i}".encode() for i in range(10)] + [f"d{i}".encode() for i in range(5)]
    )
    everything = await asyncio.to_thread(read_all, servers, "payments", "read_uncommitted", 25)
    assert sorted(everything) == sorted(
        [f"{p}{i}".encode() for p, n in (("c", 10), ("a", 10), ("d", 5)) for i in range(n)]
    )


def fenced_outcome(servers: str, topic: str) -> dict[str, Any]:
    """A producer mid-transaction, then a second with the same transactional id: the first is fenced."""
    from confluent_kafka import KafkaException, Producer

    first = Producer({"bootstrap.servers": servers, "transactional.id": "shared-tx"})
    first.init_transactions(DEADLINE_S)
    first.begin_transaction()
    first.produce(topic, value=b"from-the-first", partition=0)
    first.flush(DEADLINE_S)
    second = Producer({"bootstrap.servers": servers, "transactional.id": "shared-tx"})
    second.init_transactions(DEADLINE_S)  # aborts the first's open transaction with a bumped epoch
    second.begin_transaction()
    second.produce(topic, value=b"from-the-second", partition=0)
    second.commit_transaction(DEADLINE_S)
    outcome: dict[str, Any] = {}
    try:
        first.produce(topic, value=b"late", partition=0)
        first.commit_transaction(DEADLINE_S)
        outcome["first"] = "committed"
    except KafkaException as exc:
        error = exc.args[0]
        outcome["first"] = error.name()
        outcome["fatal"] = error.fatal()
    return outcome


async def test_a_producer_is_fenced_by_a_newer_one_with_the_same_transactional_id(cluster: Cluster) -> None:
    servers = await start(cluster, "fencing")
    outcome = await asyncio.to_thread(fenced_outcome, servers, "fencing")
    assert outcome["first"] in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), outcome
    assert outcome["fatal"] is True
    committed = await asyncio.to_thread(read_all, servers, "fencing", "read_committed", 1)
    assert committed == [b"from-the-second"]


def transform(servers: str, source: str, sink: str, group: str, expected: int) -> int:
    """Consume ``source``, produce each value upper-cased to ``sink`` and commit the consumed offsets
    in the same transaction (``send_offsets_to_transaction``); returns how many were transformed."""
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": servers, "transactional.id": f"{group}-tx"})
    producer.init_transactions(DEADLINE_S)
    consumer.subscribe([source])
    done = 0
    until = time.monotonic() + DEADLINE_S
    try:
        while done < expected and time.monotonic() < until:
            batch = consumer.consume(10, 0.5)
            batch = [m for m in batch if not m.error()]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, value=message.value().upper(), partition=message.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), DEADLINE_S
            )
            producer.commit_transaction(DEADLINE_S)
            done += len(batch)
    finally:
        consumer.close()
    return done


def committed_offsets(servers: str, topic: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], DEADLINE_S)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


async def test_consume_transform_produce_commits_its_offsets_with_its_transactions(cluster: Cluster) -> None:
    servers = await start(cluster, "raw", "upper")
    values = [f"v{i}".encode() for i in range(30)]

    def produce_input() -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": servers})
        for i, value in enumerate(values):
            producer.produce("raw", value=value, partition=i % PARTITIONS)
        assert producer.flush(DEADLINE_S) == 0

    await asyncio.to_thread(produce_input)
    done = await asyncio.to_thread(transform, servers, "raw", "upper", "uppers", len(values))
    assert done == len(values)
    output = await asyncio.to_thread(read_all, servers, "upper", "read_committed", len(values))
    assert sorted(output) == sorted(v.upper() for v in values)  # each input exactly once
    offsets = await asyncio.to_thread(committed_offsets, servers, "raw", "uppers")
    assert offsets == dict.fromkeys(range(PARTITIONS), len(values) // PARTITIONS)


REPO = Path(__file__).resolve().parents[2]
KAFKAJS = REPO / ".run" / "js" / "node_modules"


async def test_kafkajs_transactions_commit_and_abort(cluster: Cluster) -> None:
    if shutil.which("node") is None or not (KAFKAJS / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (make clients installs it from npm into .run/js)")
    servers = await start(cluster, "js-txn")
    process = await asyncio.create_subprocess_exec(
        "node", str(REPO / "tests" / "js" / "txn_client.js"), servers, "js-txn", "10",
        env={**os.environ, "NODE_PATH": str(KAFKAJS)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(DEADLINE_S * 2):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    consumed = json.loads(out.decode().strip().splitlines()[-1])["consumed"]
    # a group consumer may see a value twice across its first rebalance (at least once), never an
    # aborted one nor miss a committed one
    assert set(consumed) == {f"c{i}" for i in range(10)} | {f"d{i}" for i in range(10)}, consumed
    everything = await asyncio.to_thread(read_all, servers, "js-txn", "read_uncommitted", 30)
    assert len(everything) == 30


async def test_aiokafka_transactions_commit_and_abort(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    servers = await start(cluster, "aio-txn")
    producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id="aio-tx")
    await producer.start()
    try:
        async with asyncio.timeout(DEADLINE_S):
            async with producer.transaction():
                for i in range(10):
                    await producer.send("aio-txn", f"c{i}".encode(), partition=i % PARTITIONS)
            await producer.begin_transaction()
            for i in range(10):
                await producer.send("aio-txn", f"a{i}".encode(), partition=i % PARTITIONS)
            await producer.abort_transaction()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "aio-txn", bootstrap_servers=servers, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(DEADLINE_S):
            while len(got) < 10:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
            got += [r.value for rs in (await consumer.getmany(timeout_ms=2000)).values() for r in rs]
    finally:
        await consumer.stop()
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(10))
