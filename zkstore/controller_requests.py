"""Requests the controller picks up from ``/admin``: preferred leader elections and reassignments.

What ``kafka-leader-election.sh`` and ``kafka-reassign-partitions.sh --zookeeper`` write, propose and
verify. Plans are checked and proposed by ``placement.plans``; these read what they need, write the
request where Kafka's tools write it (never over one the controller has not handled yet) and read back
how it went. A refused request raises :class:`AdminError` and writes nothing.
"""

from __future__ import annotations

import enum
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from kazoo.exceptions import NodeExistsError

from placement.errors import AdminError
from placement.plans import check_plan, check_plan_brokers, check_reassignment_targets, propose_replicas
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.cluster_reads import live_broker_ids, read_data, topic_assignments, topic_names
from zkstore.znodes import ReplicaMap, TopicPartition

__all__ = [
    "Plan",
    "ReassignmentStatus",
    "generate_reassignment",
    "plan_json",
    "request_preferred_election",
    "request_reassignment",
    "verify_reassignment",
]

Plan: TypeAlias = dict[TopicPartition, tuple[int, ...]]


def plan_json(plan: Mapping[TopicPartition, Sequence[int]]) -> dict[str, object]:
    """A plan as the JSON object Kafka's tools print and read, through zkstore's codec."""
    decoded: dict[str, object] = json.loads(znodes.encode_reassignment(plan))
    return decoded


async def _all_partitions(zk: AsyncZooKeeper, topics: Iterable[str]) -> list[TopicPartition]:
    assignments = await topic_assignments(zk, sorted(topics))
    return sorted(TopicPartition(t, p) for t, a in assignments.items() if a for p in a.partitions)


async def request_preferred_election(
    zk: AsyncZooKeeper, topic: str | None = None, partition: int | None = None
) -> list[TopicPartition]:
    """Write ``/admin/preferred_replica_election`` for one partition, a topic, or every partition.

    Like Kafka's ZooKeeper-mode tool, refuse while a previous request is still there: the controller
    deletes the znode once it has handled it, and overwriting it would lose that request.
    """
    if partition is not None and topic is None:
        raise AdminError("a partition needs its topic")
    if topic is None:
        partitions = await _all_partitions(zk, await topic_names(zk))
    else:
        partitions = await _all_partitions(zk, [topic])
        if not partitions:
            raise AdminError(f"Topic '{topic}' does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION")
        if partition is not None:
            if TopicPartition(topic, partition) not in partitions:
                raise AdminError(
                    f"Partition {topic}-{partition} does not exist", kind="UNKNOWN_TOPIC_OR_PARTITION"
                )
            partitions = [TopicPartition(topic, partition)]
    if not partitions:
        raise AdminError("there are no partitions to elect leaders for")
    try:
        await zk.create(
            znodes.PREFERRED_REPLICA_ELECTION,
            znodes.encode_preferred_replica_election(partitions),
            makepath=True,
        )
    except NodeExistsError:
        raise AdminError(
            f"Preferred replica leader election currently in progress ({znodes.PREFERRED_REPLICA_ELECTION} "
            "exists); retry once the controller has removed it"
        ) from None
    return partitions


async def _current_replicas(zk: AsyncZooKeeper, topics: Iterable[str]) -> dict[str, ReplicaMap]:
    return {t: dict(a.partitions) for t, a in (await topic_assignments(zk, sorted(set(topics)))).items() if a}


async def request_reassignment(zk: AsyncZooKeeper, plan: Mapping[TopicPartition, Sequence[int]]) -> Plan:
    """Validate ``plan``, write ``/admin/reassign_partitions``; returns the current replicas, for rollback."""
    current = await _current_replicas(zk, (tp.topic for tp in plan))
    check_plan(plan, {TopicPartition(t, p) for t, replicas in current.items() for p in replicas})
    check_plan_brokers(plan, await live_broker_ids(zk))
    try:
        await zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(plan), makepath=True)
    except NodeExistsError:
        raise AdminError("There is an existing assignment running.") from None
    return {tp: current[tp.topic][tp.partition] for tp in sorted(plan)}


async def generate_reassignment(
    zk: AsyncZooKeeper, topics: Sequence[str], brokers: Sequence[int], *, rng: random.Random | None = None
) -> tuple[Plan, Plan]:
    """``kafka-reassign-partitions --generate``: (current, proposed) spreading the topics over ``brokers``.

    Each topic keeps its partition count and its replication factor (that of partition 0); nothing is written.
    """
    check_reassignment_targets(topics, brokers, await live_broker_ids(zk))
    current_by_topic = await _current_replicas(zk, topics)
    proposed_by_topic = propose_replicas(topics, brokers, current_by_topic, rng=rng)
    current: Plan = {}
    proposed: Plan = {}
    for topic, replicas in proposed_by_topic.items():
        proposed.update({TopicPartition(topic, p): r for p, r in replicas.items()})
        current.update({TopicPartition(topic, p): r for p, r in current_by_topic[topic].items()})
    return dict(sorted(current.items())), proposed


class ReassignmentStatus(enum.StrEnum):
    COMPLETED = "completed"
    IN_PROGRESS = "in progress"
    FAILED = "failed"


async def verify_reassignment(
    zk: AsyncZooKeeper, plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, tuple[ReassignmentStatus, tuple[int, ...]]]:
    """Per partition of ``plan``: its status and current replicas, as Kafka's ZooKeeper-mode ``--verify``.

    In progress while the controller still lists it in ``/admin/reassign_partitions`` or the topic znode
    still carries adding/removing replicas for it; completed when the replicas equal the target.
    """
    found = await read_data(zk, znodes.REASSIGN_PARTITIONS)
    pending = (znodes.decode_reassignment(found[0], znodes.REASSIGN_PARTITIONS) if found else None) or {}
    assignments = await topic_assignments(zk, sorted({tp.topic for tp in plan}))
    statuses = {}
    for tp, target in sorted(plan.items()):
        assignment = assignments.get(tp.topic)
        replicas = assignment.partitions.get(tp.partition, ()) if assignment else ()
        moving = assignment is not None and (
            tp.partition in assignment.adding_replicas or tp.partition in assignment.removing_replicas
        )
        if tp in pending or moving:
            status = ReassignmentStatus.IN_PROGRESS
        elif replicas == tuple(target):
            status = ReassignmentStatus.COMPLETED
        else:
            status = ReassignmentStatus.FAILED
        statuses[tp] = (status, replicas)
    return statuses
