"""The log cleaner in real broker processes: a compacted topic created through the Admin API is
cleaned while a producer keeps writing, and ``__consumer_offsets`` stops growing under a steady
commit load. The brokers' cleaner backs off 100 ms instead of 15 s; segments are 1 KB."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.group.config import OFFSETS_TOPIC
from protocol.compression import GZIP, LZ4, SNAPPY, ZSTD
from protocol.record_batch import RecordBatchHeader, parse_batches
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster

pytestmark = pytest.mark.zookeeper

CLEANER = {"log_cleaner_backoff_ms": 100}
SMALL = {"segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.1"}
KEYS = 20


def read_partition(servers: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of ``topic``'s partition 0 from the beginning to its high watermark when asked."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "reader", "enable.auto.commit": False})
    got: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        _, high_watermark = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append((message.offset(), message.key(), message.value()))
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= high_watermark:
                return got
        raise AssertionError(f"{topic}: offset {high_watermark} not reached within {DEADLINE_S} s")
    finally:
        consumer.close()


def produce_until(servers: str, topic: str, stop: threading.Event, last: dict[bytes, bytes]) -> None:
    """Keyed records, ``KEYS`` keys round-robin, until ``stop``; ``last`` gets each key's last value."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    i = 0
    while not stop.is_set():
        key, value = f"k{i % KEYS}".encode(), f"v{i}".encode()
        producer.produce(topic, key=key, value=value, partition=0)
        producer.poll(0)
        last[key] = value
        i += 1
        if i % 50 == 0:
            producer.flush(DEADLINE_S)
    assert producer.flush(DEADLINE_S) == 0


def create_compacted(servers: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    config = {"cleanup.policy": "compact", **SMALL}
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=30)
    futures[topic].result(DEADLINE_S)


def cleaned(topic: str, after: int = 0) -> Callable[[dict[str, Any]], bool]:
    def match(event: dict[str, Any]) -> bool:
        return bool(
            event["kind"] == "log_cleaned"
            and event["topic_partition"] == f"{topic}-0"
            and event["end_offset"] > after
        )

    return match


async def test_a_compacted_topic_keeps_one_value_per_key_while_a_producer_writes(cluster: Cluster) -> None:
    await cluster.start((1,), overrides={1: CLEANER})
    servers = cluster.bootstrap()
    await asyncio.to_thread(create_compacted, servers, "table")
    stop, last = threading.Event(), dict[bytes, bytes]()
    producing = asyncio.create_task(asyncio.to_thread(produce_until, servers, "table", stop, last))
    try:
        event = await cluster.brokers[1].wait_event(cleaned("table", 200), timeout=60, what="a cleaning")
        during = await asyncio.to_thread(read_partition, servers, "table")
    finally:
        stop.set()
        await producing
    cleaned_keys = [key for offset, key, _ in during if offset < event["end_offset"]]
    assert len(cleaned_keys) == len(set(cleaned_keys)) <= KEYS  # one value per key where cleaned
    assert event["records_removed"] > 0 and event["bytes_written"] < event["bytes_read"]
    final = await asyncio.to_thread(read_partition, servers, "table")
    latest = {key: value for _, key, value in final}
    assert latest == last  # the latest value of every key survives


CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
"""librdkafka's compression.type -> the codec its batches carry."""


def produce_compressed(servers: str, topic: str, codec: str, rounds: int) -> dict[bytes, bytes]:
    """``rounds`` values of each of ``KEYS`` keys, in batches librdkafka compresses with ``codec``;
    returns each key's last value."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "compression.type": codec, "linger.ms": 20})
    last: dict[bytes, bytes] = {}
    for i in range(rounds * KEYS):
        key, value = f"k{i % KEYS}".encode(), f"{codec}-{i}".encode() * 4
        producer.produce(topic, key=key, value=value, partition=0)
        last[key] = value
        if i % KEYS == KEYS - 1:
            producer.flush(DEADLINE_S)  # a batch of every key, compressed
    assert producer.flush(DEADLINE_S) == 0
    return last


async def test_batches_compressed_by_a_client_are_cleaned_and_read_back(cluster: Cluster) -> None:
    """librdkafka compresses, the cleaner opens each batch and writes back what stays with the same
    codec, and librdkafka reads that back: one value per key where cleaned, the latest of each."""
    await cluster.start((1,), overrides={1: CLEANER})
    servers = cluster.bootstrap()
    for codec in CODECS:
        await asyncio.to_thread(create_compacted, servers, codec)
        last = await asyncio.to_thread(produce_compressed, servers, codec, codec, 40)
        event = await cluster.brokers[1].wait_event(cleaned(codec, 200), timeout=60, what=f"{codec} cleaned")
        found = await asyncio.to_thread(read_partition, servers, codec)
        cleaned_keys = [key for offset, key, _ in found if offset < event["end_offset"]]
        assert len(cleaned_keys) == len(set(cleaned_keys)) <= KEYS, codec
        assert event["records_removed"] > 0 and event["compressed_batches_kept"] == 0, codec
        assert {key: value for _, key, value in found} == last, codec
        codecs = {header.compression for header in stored_batches(cluster, f"{codec}-0")}
        assert codecs == {CODECS[codec]}, (codec, codecs)  # compressed, cleaned or not


def stored_batches(cluster: Cluster, directory: str) -> list[RecordBatchHeader]:
    """The headers of every batch in a partition's segment files on broker 1."""
    headers = []
    for segment in sorted((cluster.brokers[1].dir / directory).glob("*.log")):
        data = segment.read_bytes()
        headers += [header for header, _, _ in parse_batches(data, verify_crc=True)]
    return headers


def offsets_log_bytes(cluster: Cluster) -> int:
    directory: Path = cluster.brokers[1].dir / f"{OFFSETS_TOPIC}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def commit_steadily(servers: str, topic: str, commits: int) -> None:
    """One group committing partition 0's offset ``commits`` times (the same key, new values)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "steady", "enable.auto.commit": False})
    try:
        for n in range(commits):
            consumer.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
    finally:
        consumer.close()


def shrink_offsets_segments(servers: str) -> None:
    """Kafka lets an internal topic's configs change; 1 KB segments roll every few commits."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": servers})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in SMALL.items()
    ]
    resource = ConfigResource("topic", OFFSETS_TOPIC, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)


async def test_consumer_offsets_stops_growing_under_a_steady_commit_load(cluster: Cluster) -> None:
    await cluster.start((1,), overrides={1: {**CLEANER, "offsets_topic_num_partitions": 1}})
    await cluster.topic("input", {0: (1,)})
    servers = cluster.bootstrap()
    await asyncio.to_thread(commit_steadily, servers, "input", 1)  # creates __consumer_offsets
    await asyncio.to_thread(shrink_offsets_segments, servers)
    await cluster.brokers[1].wait_event(
        lambda e: e["kind"] == "topic_config_applied" and e["topic"] == OFFSETS_TOPIC, what="1 KB segments"
    )
    await asyncio.to_thread(commit_steadily, servers, "input", 300)
    first = await cluster.brokers[1].wait_event(cleaned(OFFSETS_TOPIC), timeout=60, what="a cleaning")
    size = offsets_log_bytes(cluster)
    for _ in range(3):
        await asyncio.to_thread(commit_steadily, servers, "input", 300)
    await cluster.brokers[1].wait_event(
        cleaned(OFFSETS_TOPIC, after=first["end_offset"] + 600), timeout=60, what="later cleanings"
    )
    await asyncio.sleep(0.5)
    grown = offsets_log_bytes(cluster)
    print(f"__consumer_offsets-0: {size} bytes after 300 commits, {grown} after 1200")
    assert grown < max(size, 8 * 1024) * 1.5, (size, grown)  # 900 more commits, no more bytes
    # the coordinator loads the cleaned partition again after a restart: the last commit is there
    cluster.restart(1)
    await cluster.brokers[1].wait_kind("broker_started", timeout=60)
    assert await asyncio.to_thread(committed, cluster.bootstrap(), "input") == 299


def committed(servers: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "steady", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                [found] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
                return int(found.offset)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # the coordinator is still loading the partition
    finally:
        consumer.close()
