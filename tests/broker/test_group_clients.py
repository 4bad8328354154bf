"""Real clients at their default settings in consumer groups: membership, rebalances, committed offsets,
and the coordinator moving with the leadership of its ``__consumer_offsets`` partition.

Each client runs in its own thread with its own deadline, so a coordinator that stops answering fails
the test instead of hanging it. The brokers keep Kafka's defaults except a small offsets topic (six
partitions, so a three-broker cluster starts fast) and a short initial rebalance delay.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.group.config import OFFSETS_TOPIC
from protocol.consumer_offsets import partition_for
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state

pytestmark = pytest.mark.zookeeper

OFFSETS_PARTITIONS = 6
GROUP_BROKER_SETTINGS = {
    "offsets_topic_num_partitions": OFFSETS_PARTITIONS,
    "group_initial_rebalance_delay_ms": 200,
}
TOPIC_PARTITIONS = 6
REPLICATED = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(TOPIC_PARTITIONS)}


async def start(cluster: Cluster, topic: str) -> str:
    await cluster.start((1, 2, 3), overrides=dict.fromkeys((1, 2, 3), GROUP_BROKER_SETTINGS))
    await cluster.topic(topic, REPLICATED)
    return cluster.bootstrap()


def confluent_produce(servers: str, topic: str, values: list[bytes], **config: Any) -> None:
    """Keyless values spread round-robin over the partitions (by explicit partition)."""
    from confluent_kafka import KafkaException, Producer

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": servers, **config})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value,
            partition=i % TOPIC_PARTITIONS,
            on_delivery=lambda err, _: failures.append(str(err)) if err else None,
        )
        producer.poll(0)
    if producer.flush(DEADLINE_S) or failures:
        raise KafkaException(f"undelivered: {failures[:5]}")


class GroupMember(threading.Thread):
    """A confluent-kafka consumer in ``group`` with default settings, recording what it consumed and
    what it was assigned; it commits synchronously after each batch and leaves when told to stop."""

    def __init__(self, name: str, servers: str, group: str, topic: str) -> None:
        super().__init__(name=name, daemon=True)
        self.servers, self.group, self.topic = servers, group, topic
        self.consumed: list[tuple[int, int, bytes]] = []
        self.assigned: set[int] = set()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.servers,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

        def on_assign(_: Any, partitions: list[Any]) -> None:
            with self.lock:
                self.assigned = {p.partition for p in partitions}

        def on_revoke(_: Any, partitions: list[Any]) -> None:
            with self.lock:
                self.assigned = set()

        try:
            consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
            while not self.stop.is_set():
                messages = consumer.consume(num_messages=500, timeout=0.2)
                batch = [(m.partition(), m.offset(), m.value()) for m in messages if m.error() is None]
                if batch:
                    consumer.commit(asynchronous=False)
                    with self.lock:
                        self.consumed.extend(batch)
        except BaseException as exc:
            self.failure = exc
        finally:
            consumer.close()

    def snapshot(self) -> tuple[set[int], list[tuple[int, int, bytes]]]:
        with self.lock:
            return set(self.assigned), list(self.consumed)

    def finish(self) -> None:
        self.stop.set()
        self.join(DEADLINE_S)
        assert not self.is_alive(), f"{self.name} did not leave its group"
        assert self.failure is None, f"{self.name} failed: {self.failure!r}"


def committed_offsets(servers: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch returns them (partitions without one left out)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(TOPIC_PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def values(start: int, count: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(start, start + count)]


def consumed_values(*members: GroupMember) -> list[bytes]:
    return sorted((v for m in members for _, _, v in m.snapshot()[1]), key=lambda v: int(v[1:]))


async def until(condition: Callable[[], bool], what: str) -> None:
    await wait_until(condition, timeout=DEADLINE_S, what=what)


async def test_three_consumers_share_a_topic_take_over_and_resume_from_committed_offsets(
    cluster: Cluster,
) -> None:
    topic, group = "shared", "billing"
    servers = await start(cluster, topic)
    await asyncio.to_thread(confluent_produce, servers, topic, values(0, 600))
    members = [GroupMember(f"consumer-{i}", servers, group, topic) for i in range(3)]
    for member in members:
        member.start()

    def balanced() -> bool:
        assigned = [m.snapshot()[0] for m in members]
        return sorted(p for a in assigned for p in a) == list(range(TOPIC_PARTITIONS)) and all(assigned)

    await until(balanced, "six partitions shared by three consumers")
    await until(lambda: len(consumed_values(*members)) >= 600, "600 records consumed by the group")
    assert consumed_values(*members) == values(0, 600)  # each once: no partition was read twice

    leaving = members.pop()
    await asyncio.to_thread(leaving.finish)
    await until(
        lambda: sorted(p for m in members for p in m.snapshot()[0]) == list(range(TOPIC_PARTITIONS)),
        "the two remaining consumers take over the third one's partitions",
    )
    await asyncio.to_thread(confluent_produce, servers, topic, values(600, 300))
    await until(lambda: len(consumed_values(*members, leaving)) >= 900, "the new records consumed")
    for member in members:
        await asyncio.to_thread(member.finish)

    # a new consumer of the group starts from the committed offsets: only what is new reaches it
    await asyncio.to_thread(confluent_produce, servers, topic, values(900, 60))
    late = GroupMember("late", servers, group, topic)
    late.start()
    await until(lambda: len(late.snapshot()[1]) >= 60, "the records produced after the commits")
    await asyncio.sleep(1)
    await asyncio.to_thread(late.finish)
    assert consumed_values(late) == values(900, 60)


async def test_killing_the_coordinator_moves_it_and_the_group_resumes_without_skipping(
    cluster: Cluster,
) -> None:
    topic, group = "failover", "ledger"
    servers = await start(cluster, topic)
    await asyncio.to_thread(confluent_produce, servers, topic, values(0, 300))
    members = [GroupMember(f"consumer-{i}", servers, group, topic) for i in range(2)]
    for member in members:
        member.start()
    await until(lambda: len(consumed_values(*members)) >= 300, "the first records consumed")
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    state, _ = await partition_state(cluster.admin, OFFSETS_TOPIC, offsets_partition)
    cluster.brokers[state.leader].kill()

    async def coordinator_moved() -> bool:
        moved, _ = await partition_state(cluster.admin, OFFSETS_TOPIC, offsets_partition)
        return moved.leader not in (state.leader, -1)

    await wait_until(
        coordinator_moved, timeout=DEADLINE_S, what="a new leader of the group's offsets partition"
    )
    await asyncio.to_thread(confluent_produce, servers, topic, values(300, 300))
    await until(
        lambda: len(set(consumed_values(*members))) >= 600, "every record consumed after the failover"
    )
    for member in members:
        await asyncio.to_thread(member.finish)
    got = consumed_values(*members)
    assert sorted(set(got), key=lambda v: int(v[1:])) == values(0, 600)  # none skipped


async def test_kafka_python_group_consumer_and_idempotent_producer_at_defaults(cluster: Cluster) -> None:
    topic, group = "kp", "kp-group"
    servers = await start(cluster, topic)

    def produce() -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=servers)  # idempotent by default in kafka-python 3
        try:
            futures = [
                producer.send(topic, value=v, partition=i % TOPIC_PARTITIONS)
                for i, v in enumerate(values(0, 200))
            ]
            producer.flush(DEADLINE_S)
            for f in futures:
                f.get(timeout=DEADLINE_S)
        finally:
            producer.close(5)

    def consume(expected: int) -> list[bytes]:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            topic, bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest"
        )
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < expected and time.monotonic() < deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    got.extend(m.value for m in messages)
            consumer.commit()
        finally:
            consumer.close()
        return got

    await asyncio.to_thread(produce)
    first = await asyncio.to_thread(consume, 200)
    assert sorted(first, key=lambda v: int(v[1:])) == values(0, 200)
    await asyncio.to_thread(produce)
    second = await asyncio.to_thread(consume, 200)
    assert sorted(second, key=lambda v: int(v[1:])) == values(0, 200)  # the second copy only: resumed
    assert len(second) == 200


async def test_aiokafka_group_consumer_and_idempotent_producer(cluster: Cluster) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic, group = "aio", "aio-group"
    servers = await start(cluster, topic)
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, enable_idempotence=True)
    await producer.start()
    try:
        for i, value in enumerate(values(0, 120)):
            await producer.send_and_wait(topic, value, partition=i % TOPIC_PARTITIONS)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest"
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(DEADLINE_S):
            while len(got) < 120:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in messages)
        await consumer.commit()
        committed = {p: await consumer.committed(p) for p in consumer.assignment()}
    finally:
        await consumer.stop()
    assert sorted(got, key=lambda v: int(v[1:])) == values(0, 120)
    assert sum(committed.values()) == 120


REPO = Path(__file__).resolve().parents[2]
KAFKAJS = REPO / ".run" / "js" / "node_modules"


async def test_kafkajs_idempotent_producer_and_group_consumer(cluster: Cluster) -> None:
    if shutil.which("node") is None or not (KAFKAJS / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (make clients installs it from npm into .run/js)")
    topic, group = "js", "js-group"
    servers = await start(cluster, topic)

    async def run(first: int, count: int) -> list[str]:
        script = str(REPO / "tests" / "js" / "group_client.js")
        process = await asyncio.create_subprocess_exec(
            "node", script, servers, topic, group, str(first), str(count),
            env={**os.environ, "NODE_PATH": str(KAFKAJS)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(DEADLINE_S):
            out, err = await process.communicate()
        assert process.returncode == 0, err.decode()[-2000:]
        return list(json.loads(out.decode().strip().splitlines()[-1])["consumed"])

    assert sorted(await run(0, 50)) == sorted(f"js-{i}" for i in range(50))
    # the same group again: it resumes after what it committed, so only the new values arrive
    assert sorted(await run(50, 20)) == sorted(f"js-{i}" for i in range(50, 70))


async def test_kcat_balanced_consumer_and_idempotent_producer(cluster: Cluster) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (make clients installs Debian's package as root)")
    topic, group = "kcat", "kcat-group"
    servers = await start(cluster, topic)

    async def kcat_run(*args: str, stdin: bytes | None = None) -> str:
        process = await asyncio.create_subprocess_exec(
            kcat, "-b", servers, *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(DEADLINE_S):
            out, err = await process.communicate(stdin)
        assert process.returncode == 0, err.decode()[-2000:]
        return out.decode()

    def lines(first: int, count: int) -> bytes:
        # keyed, so every partition gets records and so a committed offset: where none is committed a
        # consumer starts at the end (auto.offset.reset=latest), and would miss records produced before
        return "".join(f"k{i}:kc-{i}\n" for i in range(first, first + count)).encode()

    def values_of(first: int, count: int) -> list[str]:
        return sorted(f"kc-{i}" for i in range(first, first + count))

    await kcat_run("-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true", stdin=lines(0, 100))
    consumed = await kcat_run("-G", group, "-o", "beginning", "-c", "100", "-f", "%s\n", topic)
    assert sorted(consumed.split()) == values_of(0, 100)
    # kcat commits what it consumed when it leaves; the coordinator must hold all of it
    committed = await asyncio.to_thread(committed_offsets, servers, group, topic)
    assert sum(committed.values()) == 100 and len(committed) == TOPIC_PARTITIONS, committed
    await kcat_run("-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true", stdin=lines(100, 10))
    resumed = await kcat_run("-G", group, "-c", "10", "-f", "%s\n", topic)
    assert sorted(resumed.split()) == values_of(100, 10)
