"""Replication under faults, with a real client producing: nothing acknowledged is lost, no offset
holds two different records on two replicas, and a restarted broker truncates and rejoins the ISR.

Real ZooKeeper, controller and broker processes; confluent-kafka (librdkafka) produces with acks=all
in a worker thread and records every acknowledgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.log import Log, LogConfig
from protocol.record_batch import decode_records, parse_batches
from tests.support.clients import confluent_consume
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state

pytestmark = [pytest.mark.zookeeper, pytest.mark.secure_variant]

TOPIC = "durable"
PARTITIONS = 3
REPLICAS = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(PARTITIONS)}
FAST_FAILURE = {"fixed_ports": True, "replica.lag.time.max.ms": 3000}


@dataclass
class Acked:
    partition: int
    offset: int
    value: bytes
    at: float


@dataclass
class SteadyProducer:
    """acks=all production until stopped; every acknowledgement and failure is recorded."""

    config: dict[str, str]
    acked: list[Acked] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                **self.config,
                "acks": "all",
                "linger.ms": 2,
                "enable.idempotence": False,
                "message.timeout.ms": 120000,
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is None:
                    self.acked.append(Acked(msg.partition(), msg.offset(), msg.value(), time.monotonic()))
                else:
                    self.failed.append(str(err))

        sent = 0
        while not self.stop.is_set():
            try:
                producer.produce(
                    TOPIC, value=f"record-{sent}".encode(), partition=sent % PARTITIONS, on_delivery=delivered
                )
                sent += 1
            except BufferError:
                pass
            producer.poll(0.001 if sent % 100 else 0.01)
        producer.flush(120)


def replica_records(log_dir: Path, partition: int) -> dict[int, bytes | None]:
    """offset -> value of one replica's log, read from its files after the broker stopped."""
    replica = Log.open(log_dir / f"{TOPIC}-{partition}", LogConfig())
    try:
        out: dict[int, bytes | None] = {}
        offset = replica.log_start_offset
        while offset < replica.log_end_offset:
            data = replica.read(offset, 1 << 20)
            for header, pos, size in parse_batches(data):
                for record in decode_records(data[pos : pos + size]):
                    out[header.base_offset + record.offset_delta] = record.value
                offset = header.next_offset
        return out
    finally:
        replica.close()


@contextlib.asynccontextmanager
async def steady_production(cluster: Cluster) -> AsyncIterator[SteadyProducer]:
    """A cluster of three with the topic, and acks=all production running until the block ends."""
    await cluster.start((1, 2, 3), {b: FAST_FAILURE for b in (1, 2, 3)})
    await cluster.topic(TOPIC, REPLICAS)
    producer = SteadyProducer(cluster.client_config())
    thread = threading.Thread(target=producer.run, name="steady-producer")
    thread.start()
    try:
        await wait_until(lambda: producer.count() > 3000, timeout=60, what="production under way")
        yield producer
    finally:
        producer.stop.set()
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 150)
    assert not producer.failed, producer.failed[:5]


async def consume_acknowledged(cluster: Cluster, producer: SteadyProducer) -> dict[int, list[Any]]:
    """Everything in the topic; every acknowledged record must be there, at the offset acknowledged."""
    last: dict[int, int] = {}
    for a in producer.acked:
        last[a.partition] = max(last.get(a.partition, -1), a.offset)
    got = await asyncio.to_thread(
        confluent_consume, cluster.client_config(), TOPIC, PARTITIONS, len(producer.acked), through=last
    )
    consumed = {p: {offset: value for offset, _, value in records} for p, records in got.items()}
    for a in producer.acked:
        assert consumed[a.partition].get(a.offset) == a.value, f"acknowledged {a} not consumed at its offset"
    return got


async def isr_of(cluster: Cluster, partition: int) -> tuple[int, ...]:
    state, _ = await partition_state(cluster.admin, TOPIC, partition)
    return state.isr


async def test_killing_a_leader_during_acks_all_production_loses_nothing_acknowledged(
    cluster: Cluster,
) -> None:
    async with steady_production(cluster) as producer:
        victim = (await partition_state(cluster.admin, TOPIC, 0))[0].leader
        cluster.brokers[victim].kill()
        killed_at, acked_before = time.monotonic(), producer.count()
        await wait_until(
            lambda: producer.count() > acked_before + 3000, timeout=60, what="production goes on without it"
        )
        restarted = cluster.restart(victim)
        await restarted.wait_kind("follower_truncated", timeout=60)
        for p in range(PARTITIONS):
            await wait_until(
                lambda p=p: _contains(isr_of(cluster, p), victim),
                timeout=60,
                what=f"{victim} back in ISR {p}",
            )
    acked = producer.acked
    got = await consume_acknowledged(cluster, producer)
    seen: dict[bytes, int] = defaultdict(int)
    for records in got.values():
        for _, _, value in records:
            seen[value] += 1
    twice = {a.value for a in acked if a.at < killed_at and seen[a.value] > 1}
    assert not twice, f"acknowledged before the failure yet stored twice: {sorted(twice)[:5]}"

    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    for p in range(PARTITIONS):
        replicas = [replica_records(cluster.brokers[b].dir, p) for b in REPLICAS[p]]
        for offset in set().union(*replicas):
            values = {r[offset] for r in replicas if offset in r}
            assert len(values) == 1, f"offset {offset} of partition {p} holds {values}"
        committed = {offset: value for offset, _, value in got.get(p, [])}
        for r in replicas:
            assert all(r.get(o) == v for o, v in committed.items()), f"a replica of {p} lacks committed data"


async def _contains(isr: Any, broker: int) -> bool:
    return broker in await isr


async def test_a_controlled_shutdown_during_production_moves_leadership_first(cluster: Cluster) -> None:
    async with steady_production(cluster) as producer:
        leaving = cluster.brokers[1]
        led = [
            p for p in range(PARTITIONS) if (await partition_state(cluster.admin, TOPIC, p))[0].leader == 1
        ]
        assert led
        code = await asyncio.get_running_loop().run_in_executor(None, leaving.stop)
        assert code == 0
        attempts = [e for e in leaving.poll_events() if e["kind"] == "controlled_shutdown_attempt"]
        assert attempts and attempts[-1]["error"] == "NONE" and attempts[-1]["remaining"] == []
        for p in led:
            assert (await partition_state(cluster.admin, TOPIC, p))[0].leader != 1
        acked_at_exit = producer.count()
        await wait_until(
            lambda: producer.count() > acked_at_exit + 3000, timeout=60, what="production goes on"
        )
    await consume_acknowledged(cluster, producer)
