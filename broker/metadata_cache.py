"""What this broker knows of the cluster, from UpdateMetadata: live brokers, the controller, partitions.

Copy-on-write: an update builds new maps and swaps one reference, so readers on any thread take a
consistent snapshot without locking. Partition states merge (UpdateMetadata may carry only the
partitions that changed); leader -2 removes a partition (its topic is being deleted). Topic ids come
with Kafka's v7+ (UpdateMetadata v8 at IBP 3.9), as Kafka's ZkMetadataCache keeps them: a topic named
with the zero id loses its id, a topic whose partitions are all gone loses it too.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol import LEADER_DURING_DELETE
from zkstore.znodes import TopicPartition


@dataclass(frozen=True, slots=True)
class CachedBroker:
    broker_id: int
    endpoints: dict[str, tuple[str, int]]
    """Listener name -> (host, port)."""
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class CachedPartition:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    controller_id: int = -1
    brokers: dict[int, CachedBroker] = field(default_factory=dict)
    topics: dict[str, dict[int, CachedPartition]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    """Topic name -> id, for the topics an UpdateMetadata v7+ named with one."""
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    """``topic_ids`` the other way round: what a request naming topics by id (Fetch v13+) means."""

    def partition(self, tp: TopicPartition) -> CachedPartition | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)


class MetadataCache:
    def __init__(self) -> None:
        self._snapshot = Snapshot()
        self._write = threading.Lock()

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def warm(self) -> bool:
        """Whether an UpdateMetadata has arrived: until then this broker knows no other broker."""
        return bool(self._snapshot.brokers)

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self._snapshot.brokers

    def update(self, body: dict[str, Any]) -> list[TopicPartition]:
        """Apply an UpdateMetadata body; returns the partitions it removed."""
        brokers = {
            b["id"]: CachedBroker(
                b["id"], {e["listener"]: (e["host"], e["port"]) for e in b["endpoints"]}, b["rack"]
            )
            for b in body["live_brokers"]
        }
        removed: list[TopicPartition] = []
        with self._write:
            current = self._snapshot
            topics = dict(current.topics)
            topic_ids = dict(current.topic_ids)
            for topic_state in body["topic_states"]:
                topic = topic_state["topic_name"]
                if "topic_id" in topic_state:
                    _take_topic_id(topic_ids, topic, topic_state["topic_id"])
                partitions = dict(topics.get(topic, {}))
                for s in topic_state["partition_states"]:
                    index = s["partition_index"]
                    if s["leader"] == LEADER_DURING_DELETE:
                        if partitions.pop(index, None) is not None:
                            removed.append(TopicPartition(topic, index))
                        continue
                    partitions[index] = CachedPartition(
                        leader=s["leader"],
                        leader_epoch=s["leader_epoch"],
                        isr=tuple(s["isr"]),
                        replicas=tuple(s["replicas"]),
                        offline_replicas=tuple(s["offline_replicas"]),
                        zk_version=s["zk_version"],
                        controller_epoch=s["controller_epoch"],
                    )
                if partitions:
                    topics[topic] = partitions
                else:
                    topics.pop(topic, None)
                    topic_ids.pop(topic, None)
            names = {topic_id: topic for topic, topic_id in topic_ids.items()}
            self._snapshot = Snapshot(body["controller_id"], brokers, topics, topic_ids, names)
        return removed


def _take_topic_id(topic_ids: dict[str, uuid.UUID], topic: str, topic_id: uuid.UUID) -> None:
    if topic_id.int == 0:  # Kafka's "no id"
        topic_ids.pop(topic, None)
    else:
        topic_ids[topic] = topic_id
