"""Unmodified Kafka clients pointed at a test cluster."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

DEADLINE_S = 60.0
"""How long a client call may take before the test fails instead of hanging."""


def confluent_consume(
    client: str | Mapping[str, str],
    topic: str,
    partitions: int,
    expected: int,
    *,
    through: dict[int, int] | None = None,
) -> dict[int, list[Any]]:
    """Read ``topic`` from the beginning until ``expected`` records came, and, with ``through``, until
    each partition's reads reached the offset given for it (a count alone can be met early when a
    resent batch left a duplicate in another partition)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    config = {"bootstrap.servers": client} if isinstance(client, str) else dict(client)
    consumer = Consumer({**config, "group.id": "assign-only", "enable.auto.commit": False})
    got: dict[int, list[Any]] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + DEADLINE_S

        def short() -> bool:
            if sum(len(v) for v in got.values()) < expected:
                return True
            return any(max((o for o, _, _ in got[p]), default=-1) < end for p, end in (through or {}).items())

        while short() and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    got[message.partition()].append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return got


def confluent_round_trip(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, bytes, bytes]],
    config: dict[str, str] | None = None,
) -> list[Any]:
    """Produce ``records`` (partition, key, value) with acks=all, then read every partition back;
    ``config`` adds client settings (security).

    As in tests/broker/test_clients.py: no idempotence (these brokers serve no InitProducerId), and a
    consumer that assigns partitions instead of joining a group.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    common = {**(config or {}), "bootstrap.servers": bootstrap}
    failures: list[str] = []
    producer = Producer({**common, "acks": "all", "enable.idempotence": False})

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
    if producer.flush(30) or failures:
        raise KafkaException(f"undelivered records; failures: {failures[:5]}")
    consumer = Consumer({**common, "group.id": "assign-only", "enable.auto.commit": False})
    got: list[Any] = []
    try:
        partitions = sorted({p for p, _, _ in records})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        for _ in range(60):  # bounded: at most 60 polls of 0.5 s
            got += [m for m in consumer.consume(num_messages=1000, timeout=0.5) if m.error() is None]
            if len(got) >= len(records):
                break
    finally:
        consumer.close()
    return [(m.partition(), m.key(), m.value()) for m in got]


QUIET_POLLS = 6
"""Polls of half a second in a row that bring nothing, after which a read-back has everything."""


def drained(consumer: Any, quiet_polls: int = QUIET_POLLS) -> list[Any]:
    """Every message a confluent-kafka ``consumer`` brings (error events left out) until
    ``quiet_polls`` polls in a row bring none."""
    messages: list[Any] = []
    quiet = 0
    while quiet < quiet_polls:
        batch = [m for m in consumer.consume(500, 0.5) if m.error() is None]
        quiet = 0 if batch else quiet + 1
        messages += batch
    return messages
