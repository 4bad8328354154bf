"""Everything the active controller knows: one plain object, mutated only by the event-loop task.

It mirrors ZooKeeper (brokers with their epochs, topics, assignments, leadership) plus the controller's
own bookkeeping (state-machine states, brokers shutting down, topics queued for deletion). The pure
functions of the controller read it; only the event handler writes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from controller.model import LeaderIsrAndControllerEpoch, Reassignment, TopicPartition
from controller.state_tables import PartitionState, ReplicaState
from zkstore.znodes import BrokerRegistration


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker and its epoch: the czxid of its ``/brokers/ids/N`` znode (KIP-380)."""

    registration: BrokerRegistration
    epoch: int

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id


@dataclass
class ControllerContext:
    controller_id: int
    epoch: int = 0
    epoch_zk_version: int = 0
    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    """Live or shutting-down brokers: shutting-down ones still receive requests."""
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID | None] = field(default_factory=dict)
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)
    """Partitions being reassigned; their ``assignments`` entry holds the full replica set (RS)."""

    # -- brokers

    @property
    def live_or_shutting_down_ids(self) -> set[int]:
        return set(self.brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers eligible for leadership and the ISR: registered and not shutting down."""
        return set(self.brokers) - self.shutting_down

    def broker_epochs(self) -> dict[int, int]:
        return {b: info.epoch for b, info in self.brokers.items()}

    @property
    def max_broker_epoch(self) -> int:
        """The largest epoch among live brokers (seed 002); -1 with no broker."""
        return max((info.epoch for info in self.brokers.values()), default=-1)

    def is_replica_online(self, broker_id: int) -> bool:
        return broker_id in self.brokers and broker_id not in self.shutting_down

    # -- partitions

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        partitions = self.assignments.get(tp.topic)
        return () if partitions is None else partitions.get(tp.partition, ())

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic, partitions in self.assignments.items():
            for partition in partitions:
                yield TopicPartition(topic, partition)

    def partitions_of(self, topics: Iterable[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in self.assignments.get(t, {})]

    def partitions_on_brokers(self, broker_ids: Iterable[int]) -> list[TopicPartition]:
        wanted = set(broker_ids)
        return [tp for tp in self.all_partitions() if not wanted.isdisjoint(self.replicas(tp))]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, info in self.leadership.items() if info.leader_and_isr.leader == broker_id]

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(r for r in self.replicas(tp) if not self.is_replica_online(r))

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def forget_topic(self, topic: str) -> None:
        """Drop every trace of a topic that is gone from ZooKeeper (deleted, or removed by hand)."""
        for tp in self.partitions_of([topic]):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in self.replicas(tp):
                self.replica_states.pop((tp, r), None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        for tp in [tp for tp in self.reassignments if tp.topic == topic]:
            del self.reassignments[tp]

    def reset(self) -> None:
        """Forget everything learned while active (on resignation), keeping only who we are."""
        controller_id = self.controller_id
        self.__dict__.update(ControllerContext(controller_id).__dict__)
