"""The compose cluster as a client on the host sees it: the test topic's metadata, records through it.

The clients reach the brokers through the ports compose publishes; what librdkafka logs (the
disconnects that faults cause) goes to ``.run/docker/clients.log``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from deploy.compose import REPO

__all__ = [
    "BOOTSTRAP",
    "CACHE",
    "PARTITIONS",
    "REPLICATION_FACTOR",
    "TOPIC",
    "CheckFailed",
    "Metadata",
    "admin_client",
    "client_config",
    "metadata",
    "round_trip",
]

CACHE = REPO / ".run" / "docker"
"""Where the run keeps its files: the images' cache, the engine's and the clients' logs, the reports."""
BOOTSTRAP = "localhost:9092,localhost:9093,localhost:9094"
TOPIC = "compose-test"
PARTITIONS, REPLICATION_FACTOR = 6, 3


class CheckFailed(AssertionError):
    """A step saw something other than what it waits for."""


@dataclass(frozen=True)
class Metadata:
    """What a client on the host sees: live brokers, and each partition's leader and ISR."""

    brokers: frozenset[int]
    leaders: dict[int, int]
    isrs: dict[int, frozenset[int]]

    def led_by(self, broker: int) -> list[int]:
        return sorted(p for p, leader in self.leaders.items() if leader == broker)

    def fenced(self, broker: int) -> bool:
        """``broker`` is gone from the metadata, leads nothing and is in no ISR."""
        in_isr = any(broker in isr for isr in self.isrs.values())
        return broker not in self.brokers and not self.led_by(broker) and not in_isr

    def whole(self, broker_count: int) -> bool:
        """Every broker is back, every partition has a leader and a full ISR."""
        full = all(len(isr) == REPLICATION_FACTOR for isr in self.isrs.values())
        leaders = all(leader >= 0 for leader in self.leaders.values())
        return len(self.brokers) == broker_count and full and leaders and len(self.leaders) == PARTITIONS


def client_config(security: dict[str, str], **settings: Any) -> dict[str, Any]:
    """A client's settings with ``security`` (the secured variant's); librdkafka's own log (the
    disconnects that faults cause) goes to a file."""
    return {"bootstrap.servers": BOOTSTRAP, **security, "logger": client_log(), **settings}


def client_log() -> logging.Logger:
    """``.run/docker/clients.log``: where the clients' librdkafka log lines go."""
    logger = logging.getLogger("deploy.compose_test.clients")
    if not logger.handlers:
        CACHE.mkdir(parents=True, exist_ok=True)
        logger.addHandler(logging.FileHandler(CACHE / "clients.log"))
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    return logger


def admin_client(security: dict[str, str]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(security, **{"socket.timeout.ms": 5000}))


def metadata(admin: Any) -> Metadata:
    """The topic's metadata, from whichever broker answers."""
    md = admin.list_topics(topic=TOPIC, timeout=5)
    topic = md.topics[TOPIC]
    if topic.error is not None:
        raise CheckFailed(f"metadata for {TOPIC}: {topic.error}")
    return Metadata(
        brokers=frozenset(md.brokers),
        leaders={p: pm.leader for p, pm in topic.partitions.items()},
        isrs={p: frozenset(pm.isrs) for p, pm in topic.partitions.items()},
    )


def round_trip(topic: str, count: int, tag: str, security: dict[str, str]) -> int:
    """Produce ``count`` records with acks=all over every partition, then read them all back by
    assignment (no group); the number read back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    failures: list[str] = []
    producer = Producer(client_config(security, acks="all", **{"enable.idempotence": False}))
    for i in range(count):
        producer.produce(
            topic,
            key=f"{tag}-{i}".encode(),
            value=f"record {i} ({tag})".encode(),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
        )
    if producer.flush(30) or failures:
        raise CheckFailed(f"records not acknowledged: {failures[:3]}")
    consumer = Consumer(client_config(security, **{"group.id": "compose-test", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        keys: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(keys) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                key = message.key() or b""
                if message.error() is None and key.startswith(f"{tag}-".encode()):
                    keys.add(key)
    finally:
        consumer.close()
    if len(keys) != count:
        raise CheckFailed(f"read back {len(keys)} of {count} records")
    return len(keys)
