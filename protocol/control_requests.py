"""Control requests read into one form from every layout, the broker-epoch fence, and the answers.

Each answer is written in the layout of the version it answers.

LeaderAndIsr, UpdateMetadata and StopReplica differ by version and dialect (``protocol/ibp.py``):
KIP-380's v2 / v5 / v1, the seed's v5 / v7 / v4 (``max_broker_epoch``) and Apache Kafka 3.9's v7 / v8
/ v4. The replica manager and the metadata cache work on what this module reads; nothing else in the
broker needs to know which layout a request came in:

* a LeaderAndIsr partition carries its topic's id from Kafka's v5 (the zero id means none), and its
  answer lists errors by topic id there (``topics``) instead of by topic name (``partition_errors``);
* StopReplica from Kafka's v3 gives each partition its own leader epoch and ``delete_partition``
  (``topic_states``); earlier layouts one ``delete_partitions`` for all and no epoch (Kafka's NoEpoch,
  -1, which skips the epoch check);
* ``is_kraft_controller`` (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4) is true only from a
  KRaft controller during a ZooKeeper migration, which this broker does not take part in.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol import DEFAULT_DIALECT, UNKNOWN_BROKER_EPOCH, ApiKey, ErrorCode, WireDialect, epoch_field
from protocol.messages.leader_and_isr import FIRST_TOPIC_ID_VERSION
from protocol.registry import api_spec
from protocol.topic_partition import TopicPartition

__all__ = [
    "NO_EPOCH",
    "ZERO_TOPIC_ID",
    "PartitionOrder",
    "StopOrder",
    "answers_by_topic_id",
    "broker_epoch_is_stale",
    "control_error",
    "from_kraft_controller",
    "leader_and_isr_answer",
    "leader_and_isr_orders",
    "stop_replica_answer",
    "stop_replica_orders",
    "topic_ids",
]

NO_EPOCH = -1
"""Kafka's LeaderAndIsr.NoEpoch: what a StopReplica without per-partition epochs stands for."""
ZERO_TOPIC_ID = uuid.UUID(int=0)
"""Kafka's Uuid.ZERO_UUID: "no topic id"."""


@dataclass(frozen=True, slots=True)
class PartitionOrder:
    """One partition of a LeaderAndIsr: its state as decoded, and its topic's id if the request gave one."""

    tp: TopicPartition
    topic_id: uuid.UUID | None
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StopOrder:
    """One partition of a StopReplica."""

    tp: TopicPartition
    leader_epoch: int
    """-1: none given (the epoch check is skipped); -2: the topic is being deleted (also skipped)."""
    delete: bool


def answers_by_topic_id(version: int, dialect: WireDialect) -> bool:
    """Whether a LeaderAndIsr of ``version`` read in ``dialect`` is Kafka's v5+ layout, answered by
    topic id; the seed's v5 (SEED dialect) is v2's layout and answers by name."""
    spec = api_spec(ApiKey.LEADER_AND_ISR)
    return version >= FIRST_TOPIC_ID_VERSION and not spec.is_seed_layout(version, dialect)


def from_kraft_controller(body: Mapping[str, Any]) -> bool:
    """Whether a control request says it comes from a KRaft controller (a ZooKeeper migration)."""
    return bool(body.get("is_kraft_controller", False))


def _topic_id(topic_state: Mapping[str, Any]) -> uuid.UUID | None:
    topic_id: uuid.UUID | None = topic_state.get("topic_id")
    return None if topic_id is None or topic_id == ZERO_TOPIC_ID else topic_id


def leader_and_isr_orders(body: Mapping[str, Any]) -> list[PartitionOrder]:
    """Every partition of a LeaderAndIsr body, in request order."""
    return [
        PartitionOrder(TopicPartition(t["topic_name"], s["partition_index"]), _topic_id(t), s)
        for t in body["topic_states"]
        for s in t["partition_states"]
    ]


def topic_ids(body: Mapping[str, Any]) -> dict[str, uuid.UUID]:
    """Topic name -> id, for the topics of a LeaderAndIsr or UpdateMetadata body that carry one."""
    return {t["topic_name"]: topic_id for t in body["topic_states"] if (topic_id := _topic_id(t))}


def stop_replica_orders(body: Mapping[str, Any]) -> list[StopOrder]:
    """Every partition of a StopReplica body, in request order, whatever its layout."""
    if "topic_states" in body:  # Kafka's v3+
        return [
            StopOrder(
                TopicPartition(t["topic_name"], s["partition_index"]),
                s["leader_epoch"],
                s["delete_partition"],
            )
            for t in body["topic_states"]
            for s in t["partition_states"]
        ]
    delete = bool(body["delete_partitions"])
    return [
        StopOrder(TopicPartition(t["name"], index), NO_EPOCH, delete)
        for t in body["topics"]
        for index in t["partition_indexes"]
    ]


def leader_and_isr_answer(
    body: Mapping[str, Any], by_topic_id: bool, code: int, errors: Mapping[TopicPartition, int]
) -> dict[str, Any]:
    """A LeaderAndIsr answer: ``errors`` by topic name, or (``by_topic_id``) grouped by the topic ids
    the request named, as Kafka's v5+ answer (the zero id for a topic the request gave none)."""
    if not by_topic_id:
        return {
            "error_code": code,
            "partition_errors": [
                {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": error}
                for tp, error in errors.items()
            ],
        }
    ids = {t["topic_name"]: t.get("topic_id") or ZERO_TOPIC_ID for t in body["topic_states"]}
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        entry = {"partition_index": tp.partition, "error_code": error}
        topics.setdefault(ids.get(tp.topic, ZERO_TOPIC_ID), []).append(entry)
    return {
        "error_code": code,
        "topics": [{"topic_id": topic_id, "partition_errors": p} for topic_id, p in topics.items()],
    }


def stop_replica_answer(code: int, errors: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """A StopReplica answer: the same layout in every version (flexible from v2)."""
    return {
        "error_code": code,
        "partition_errors": [
            {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": error}
            for tp, error in errors.items()
        ],
    }


def control_error(
    api_key: int, body: Mapping[str, Any], code: ErrorCode, *, by_topic_id: bool
) -> dict[str, Any]:
    """A control request refused as a whole, as Kafka's ``getErrorResponse`` writes it: LeaderAndIsr
    names every partition it carried with the code, StopReplica none."""
    if api_key == ApiKey.LEADER_AND_ISR:
        errors = {order.tp: int(code) for order in leader_and_isr_orders(body)}
        return leader_and_isr_answer(body, by_topic_id, code, errors)
    if api_key == ApiKey.STOP_REPLICA:
        return stop_replica_answer(code, {})
    return {"error_code": code}


def broker_epoch_is_stale(
    api_key: int,
    version: int,
    body: dict[str, Any],
    own_epoch: int,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> bool:
    """Whether a control request (read in ``dialect``) is meant for an earlier registration of this broker.

    KIP-380's ``broker_epoch``: older than ours, except -1, which a controller that predates KIP-380
    leaves there. Seed 002's ``max_broker_epoch``: older than ours, no exception; it is the maximum
    of the live brokers' epochs, which a controller sending these versions always knows, so a -1
    has no legitimate sender and accepting it would let any request past the fence.
    """
    field = epoch_field(ApiKey(api_key), version, dialect)
    epoch: int = body[field]
    if field == "max_broker_epoch":
        return epoch < own_epoch
    return epoch != UNKNOWN_BROKER_EPOCH and epoch < own_epoch
