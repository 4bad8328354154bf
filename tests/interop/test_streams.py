"""A Kafka Streams application, 3.9 and 4.4, on a cluster of our daemons: Kafka's word count, at_least_once
and exactly_once_v2.

``programs/WordCount.java`` is Kafka's WordCountDemo (lines in, a count per word out, through a
repartition topic and a changelogged state store). Lines produced before it starts must come out as
the right final counts. Streams creates its changelog topics with ``cleanup.policy=compact``, which the
brokers compact (``broker.cleaner``); the runs with ``topic.cleanup.policy=delete`` and
``topic.retention.ms=-1`` keep its internal topics whole instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.interop.java import VERSION_IDS, JavaSide
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)
SETTINGS = {
    "offsets_topic_num_partitions": 6,
    "transaction_state_log_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 0,
}
LINES = [
    "the quick brown fox jumps over the lazy dog",
    "The dog barks and the fox runs",
    "a quick brown dog",
    "over and over and over",
]
EXPECTED = Counter(word for line in LINES for word in line.lower().split())
KEPT_WHOLE = ("topic.cleanup.policy=delete", "topic.retention.ms=-1")
"""Streams settings for its internal topics: delete policy, no retention (a log kept whole)."""


def produce_lines(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    producer = Producer(cluster.client_config())
    for line in LINES:
        producer.produce("words-in", value=line.encode())
    assert producer.flush(DEADLINE_S) == 0


def read_counts(cluster: Cluster, stop: threading.Event) -> dict[str, int]:
    """The latest count per word in words-out, read until they are the expected ones, ``stop`` is set
    (the application ended) or the deadline passes."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            **cluster.client_config(),
            "group.id": "checker",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # what exactly-once output is read with
        }
    )
    counts: dict[str, int] = {}
    try:
        consumer.assign([TopicPartition("words-out", p, OFFSET_BEGINNING) for p in (0, 1)])
        deadline = time.monotonic() + 2 * DEADLINE_S
        while counts != EXPECTED and not stop.is_set() and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.2):
                if message.error() is None:
                    counts[message.key().decode()] = struct.unpack(">q", message.value())[0]
        return counts
    finally:
        consumer.close()


def committed(cluster: Cluster) -> dict[int, int]:
    """What the application's group (its application id) committed on its input."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**cluster.client_config(), "group.id": "word-count"})
    try:
        found = consumer.committed([TopicPartition("words-in", p) for p in (0, 1)], timeout=DEADLINE_S)
        return {tp.partition: max(tp.offset, 0) for tp in found}
    finally:
        consumer.close()


async def word_count(
    cluster: Cluster, tmp_path: Path, version: str, *settings: str
) -> tuple[dict[str, int], str]:
    """Run the application over LINES: the counts it wrote, and what it printed (state changes, failure)."""
    await cluster.start(BROKERS, overrides=dict.fromkeys(BROKERS, SETTINGS))
    await cluster.topic("words-in", {0: (1, 2), 1: (2, 3)})
    await cluster.topic("words-out", {0: (3, 1), 1: (1, 2)})
    await asyncio.to_thread(produce_lines, cluster)
    java = JavaSide(version, cluster, tmp_path)
    state_dir = str(tmp_path / "streams-state")
    app = await java.start(
        "WordCount", str(java.config), "word-count", "words-in", "words-out", state_dir, *settings
    )
    assert app.stdout is not None
    stop = threading.Event()
    printed: list[str] = []

    async def follow() -> None:
        assert app.stdout is not None
        async for line in app.stdout:
            printed.append(line.decode(errors="replace").rstrip())
        stop.set()

    follower = asyncio.create_task(follow())
    try:
        counts = await asyncio.to_thread(read_counts, cluster, stop)
    finally:
        stop.set()
        if app.returncode is None:
            app.terminate()  # SIGTERM: the shutdown hook closes the application
        try:
            async with asyncio.timeout(30):
                await app.wait()
        except TimeoutError:
            app.kill()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    return counts, "\n".join(printed)


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_word_count_with_internal_topics_kept_whole(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    counts, printed = await word_count(cluster, tmp_path, version, *KEPT_WHOLE)
    assert counts == EXPECTED, printed
    assert "state RUNNING" in printed and "failed" not in printed
    # the application's group committed its progress: every line was read
    offsets = await asyncio.to_thread(committed, cluster)
    assert sum(offsets.values()) == len(LINES), offsets


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_word_count_exactly_once_v2(cluster: Cluster, tmp_path: Path, version: str) -> None:
    """processing.guarantee=exactly_once_v2: each task's output, state changes and input offsets go in
    one transaction (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit with the
    group's generation, EndTxn), read back with read_committed."""
    counts, printed = await word_count(
        cluster, tmp_path, version, *KEPT_WHOLE, "processing.guarantee=exactly_once_v2"
    )
    assert counts == EXPECTED, printed
    assert "state RUNNING" in printed and "failed" not in printed
    offsets = await asyncio.to_thread(committed, cluster)
    assert sum(offsets.values()) == len(LINES), offsets


async def test_word_count_at_streams_defaults(cluster: Cluster, tmp_path: Path) -> None:
    """Streams' changelog topics ask for compaction, which the brokers accept and do."""
    counts, printed = await word_count(cluster, tmp_path, VERSION_IDS[-1])
    assert counts == EXPECTED, printed
    assert "state RUNNING" in printed and "failed" not in printed
