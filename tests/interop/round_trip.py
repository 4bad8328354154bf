"""The Java producer-and-group round trip (``programs/ClientsProbe.java``), run and judged alike on
PLAINTEXT (``test_java_clients.py``) and on the secured layout (``test_java_secured.py``).

The producer is idempotent, Kafka's default since 3.0 (acks=all, a producer id from InitProducerId);
the consumers are members of one group on the classic protocol. What they committed is read back by
another client (confluent-kafka), and the producer ids by the brokers' event logs.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from tests.interop.java import JavaRun, JavaSide
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster

__all__ = ["COUNT", "EXTRA", "ORDERS", "RoundTrip", "check", "round_trip"]

ORDERS = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(3)}
"""The topic ``orders``: three partitions on three brokers (create it before :func:`round_trip`)."""
COUNT = 300
EXTRA = 10
"""ClientsProbe sends ten more records after the first member of the group has committed."""
GROUP = "java-group"

Record = tuple[int, int, str, str]


@dataclass
class RoundTrip:
    run: JavaRun
    committed: dict[int, int]
    """The group's offsets as confluent-kafka fetches them from the coordinator."""
    claimed: bool
    """Whether a broker claimed a block of producer ids (idempotent producers asked for one)."""


def committed_offsets(cluster: Cluster) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**cluster.client_config(), "group.id": GROUP})
    try:
        found = consumer.committed([TopicPartition("orders", p) for p in ORDERS], timeout=DEADLINE_S)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


async def round_trip(java: JavaSide) -> RoundTrip:
    run = await java.program("ClientsProbe", str(java.config), "orders", str(COUNT), GROUP)
    committed = await asyncio.to_thread(committed_offsets, java.cluster)
    claimed = any(b.of_kind("producer_id_block_claimed") for b in java.cluster.brokers.values())
    return RoundTrip(run, committed, claimed)


def check(trip: RoundTrip) -> None:
    """Every record sent was read once, in the group, and the group's offsets are the log ends."""
    out = trip.run.ok().result()
    sent: list[Record] = [tuple(r) for r in out["sent"]]  # type: ignore[misc]
    assert [r[2] for r in sent] == [f"k{i}" for i in range(COUNT + EXTRA)]
    assert len({(p, offset) for p, offset, _, _ in sent}) == COUNT + EXTRA  # every record its own offset
    assert sorted(tuple(r) for r in out["first"]) == sorted(sent[:COUNT])
    # the second member started from the first one's commits: it read only the records sent after them
    assert sorted(tuple(r) for r in out["second"]) == sorted(sent[COUNT:])
    assert out["assigned"] == sorted(ORDERS)
    ends: dict[int, int] = defaultdict(int)
    for partition, offset, _, _ in sent:
        ends[partition] = max(ends[partition], offset + 1)
    assert out["committed"] == {str(p): end for p, end in ends.items()}
    assert trip.committed == dict(ends)
    assert trip.claimed
