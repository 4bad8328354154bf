"""Unmodified Kafka clients (kafka-python, confluent-kafka) produce to and consume from real brokers.

Real ZooKeeper, a controller process and broker processes; the clients run in worker threads with
their own timeouts, so a broker that stops answering fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.support.clients import DEADLINE_S, confluent_consume
from tests.support.cluster import Cluster

pytestmark = pytest.mark.zookeeper


def records_for(partitions: int, count: int) -> list[tuple[int, bytes, bytes]]:
    return [(i % partitions, f"key-{i}".encode(), f"v-{i}-{'x' * (i % 50)}".encode()) for i in range(count)]


# ---------------------------------------------------------------- kafka-python


Records = list[tuple[int, bytes, bytes]]
"""(partition, key, value) in the order produced."""


def kafka_python_produce(servers: str, topic: str, records: Records, acks: Any) -> None:
    from kafka import KafkaProducer

    # Idempotence (kafka-python's default) needs InitProducerId, which these brokers do not serve.
    producer = KafkaProducer(
        bootstrap_servers=servers, acks=acks, linger_ms=5, request_timeout_ms=20000, enable_idempotence=False
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in records]
        producer.flush(DEADLINE_S)
        for future in futures:
            future.get(timeout=DEADLINE_S)
    finally:
        producer.close(5)


def kafka_python_consume(servers: str, topic: str, partitions: int, expected: int) -> dict[int, list[Any]]:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=servers, enable_auto_commit=False, group_id=None, request_timeout_ms=20000
    )
    got: dict[int, list[Any]] = defaultdict(list)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(v) for v in got.values()) < expected and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend((m.offset, m.key, m.value) for m in messages)
    finally:
        consumer.close()
    return got


# ---------------------------------------------------------------- confluent-kafka


def confluent_produce(servers: str, topic: str, records: list[tuple[int, bytes, bytes]], acks: str) -> None:
    from confluent_kafka import KafkaException, Producer

    failures: list[str] = []
    producer = Producer(
        {"bootstrap.servers": servers, "acks": acks, "linger.ms": 5, "enable.idempotence": False}
    )

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for p, k, v in records:
        while True:
            try:
                producer.produce(topic, key=k, value=v, partition=p, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(DEADLINE_S)
    if remaining or failures:
        raise KafkaException(f"{remaining} undelivered, failures: {failures[:5]}")


# ---------------------------------------------------------------- checks


def assert_all_in_order(got: dict[int, list[Any]], records: list[tuple[int, bytes, bytes]]) -> None:
    sent: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for p, k, v in records:
        sent[p].append((k, v))
    for partition, expected in sent.items():
        received = got.get(partition, [])
        assert [(k, v) for _, k, v in received] == expected, f"partition {partition}"
        offsets = [o for o, _, _ in received]
        assert offsets == list(range(len(expected))), f"partition {partition}: offsets {offsets[:5]}..."


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
async def test_single_replica_partitions_round_trip_with_acks_1_all_and_0(
    cluster: Cluster, client: str
) -> None:
    await cluster.start((1, 2, 3))
    topic = f"round-trip-{client}"
    await cluster.topic(topic, {0: (1,), 1: (2,), 2: (3,)})
    servers = cluster.bootstrap()
    batches = [records_for(3, 3000), records_for(3, 3000)[::-1], records_for(3, 900)]
    loop = asyncio.get_running_loop()
    for records, acks in zip(batches, ("1", "all", "0"), strict=True):
        if client == "kafka-python":
            kafka_acks: Any = "all" if acks == "all" else int(acks)
            await loop.run_in_executor(None, kafka_python_produce, servers, topic, records, kafka_acks)
        else:
            await loop.run_in_executor(None, confluent_produce, servers, topic, records, acks)
    expected = [r for records in batches for r in records]
    consume = kafka_python_consume if client == "kafka-python" else confluent_consume
    got = await loop.run_in_executor(None, consume, servers, topic, 3, len(expected))
    assert_all_in_order(got, expected)


REPLICATED = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(6)}
"""Six partitions, replication factor 3, leadership spread over the three brokers."""


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
async def test_replicated_partitions_round_trip_with_acks_all(cluster: Cluster, client: str) -> None:
    await cluster.start((1, 2, 3))
    topic = f"replicated-{client}"
    await cluster.topic(topic, REPLICATED)
    servers = cluster.bootstrap()
    records = records_for(6, 100_000)
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    if client == "kafka-python":
        await loop.run_in_executor(None, kafka_python_produce, servers, topic, records, "all")
        produced = time.monotonic()
        got = await loop.run_in_executor(None, kafka_python_consume, servers, topic, 6, len(records))
    else:
        await loop.run_in_executor(None, confluent_produce, servers, topic, records, "all")
        produced = time.monotonic()
        got = await loop.run_in_executor(None, confluent_consume, servers, topic, 6, len(records))
    consumed = time.monotonic() - produced
    print(f"{client}: produced in {produced - started:.1f} s, consumed in {consumed:.1f} s")
    assert_all_in_order(got, records)
