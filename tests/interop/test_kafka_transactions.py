"""Transactions across implementations: one Kafka 3.9 broker (the controller) and two of ours share a
cluster, its ``__transaction_state`` and a topic led by both kinds. Each transactional id's coordinator
is whichever broker leads its state partition, Kafka's or ours: each sends WriteTxnMarkers to the
leaders of both kinds, and a read_committed consumer sees exactly the committed transactions.
"""

from __future__ import annotations

import asyncio

from protocol.transaction_log import transaction_partition_for
from tests.interop.conftest import KafkaBrokers
from tests.interop.test_kafka_broker import beside_ours
from tests.support.clients import DEADLINE_S, drained
from tests.support.cluster import Cluster
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

STATE_PARTITIONS = 4
TXN = {"transaction.state.log.num.partitions": STATE_PARTITIONS, "offsets.topic.num.partitions": 4}
IDS = [f"mixed-{i}" for i in range(8)]
"""Enough transactional ids that both kinds of broker coordinate some."""


def run_transactions(servers: str) -> None:
    """Per id: one transaction committed over every partition, one aborted."""
    from confluent_kafka import Producer

    for transactional_id in IDS:
        producer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id})
        producer.init_transactions(DEADLINE_S)
        for outcome in ("commit", "abort"):
            producer.begin_transaction()
            for partition in range(3):
                producer.produce("mixed-txn", value=f"{transactional_id}-{outcome}-{partition}".encode(),
                                 partition=partition)  # fmt: skip
            producer.flush(DEADLINE_S)
            if outcome == "commit":
                producer.commit_transaction(DEADLINE_S)
            else:
                producer.abort_transaction(DEADLINE_S)


def read_committed(servers: str) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "mixed-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition("mixed-txn", p, 0) for p in range(3)])
        return [m.value().decode() for m in drained(consumer)]
    finally:
        consumer.close()


async def state_leaders(zk: AsyncZooKeeper) -> dict[int, int]:
    """``__transaction_state`` partition -> its leader."""
    leaders = {}
    for partition in range(STATE_PARTITIONS):
        path = f"{znodes.BROKER_TOPICS}/__transaction_state/partitions/{partition}/state"
        data, _ = await zk.get(path)
        state = znodes.decode_leader_isr_state(data, path)
        assert state is not None
        leaders[partition] = state.leader
    return leaders


async def test_transactions_coordinated_by_both_kinds_of_broker(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    kafka_broker = await beside_ours(kafka, zk, 0, **TXN)
    ours = [cluster.broker(b, transaction_state_log_num_partitions=STATE_PARTITIONS,
                           offsets_topic_num_partitions=4) for b in (1, 2)]  # fmt: skip
    for broker in ours:
        await broker.wait_kind("registered", timeout=60)
    await create_topic(zk, "mixed-txn", {0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1)})
    servers = ",".join([kafka_broker.bootstrap(), *("{}:{}".format(*b.endpoint("PLAINTEXT")) for b in ours)])
    await asyncio.to_thread(run_transactions, servers)

    leaders = await state_leaders(zk)
    coordinators = {leaders[transaction_partition_for(t, STATE_PARTITIONS)] for t in IDS}
    assert 0 in coordinators and coordinators & {1, 2}, f"coordinators {coordinators} of {leaders}"
    got = await asyncio.to_thread(read_committed, servers)
    assert sorted(got) == sorted(f"{t}-commit-{p}" for t in IDS for p in range(3))
