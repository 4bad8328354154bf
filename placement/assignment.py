"""Replica assignments of topics: Kafka's rack-unaware assignment and the checks of a given one.

Pure functions over broker ids (``AdminUtils`` in Kafka); ``zkstore.topic_writes`` reads the live brokers
and the current assignment, calls these, and writes what they return.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from typing import TypeAlias

from placement.errors import AdminError

__all__ = [
    "ReplicaMap",
    "added_partitions",
    "assign_replicas",
    "check_assignment",
    "check_partition_increase",
    "new_topic_assignment",
    "parse_replica_assignment",
]

ReplicaMap: TypeAlias = dict[int, tuple[int, ...]]
"""Partition → its replicas, the preferred leader first (``zkstore.znodes.ReplicaMap`` is the same type)."""


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> ReplicaMap:
    """Kafka's rack-unaware assignment (``AdminUtils.assignReplicasToBrokersRackUnaware``).

    First replicas go round-robin from a start broker; the followers are shifted by an amount that grows
    every time the partitions wrap around the brokers, so leaders and followers both spread evenly.
    ``start_index`` fixes both the start broker and the first shift (Kafka's ``fixedStartIndex``);
    otherwise both are random, as in Kafka.
    """
    if partitions <= 0:
        raise AdminError("Number of partitions must be larger than 0.", kind="INVALID_PARTITIONS")
    if replication_factor <= 0:
        raise AdminError("Replication factor must be larger than 0.", kind="INVALID_REPLICATION_FACTOR")
    if replication_factor > len(brokers):
        raise AdminError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
            kind="INVALID_REPLICATION_FACTOR",
        )
    ordered = sorted(brokers)
    count = len(ordered)
    rng = rng or random.Random()
    first_index = start_index if start_index is not None else rng.randrange(count)
    shift = start_index if start_index is not None else rng.randrange(count)
    assignment: ReplicaMap = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + first_index) % count
        followers = (
            ordered[(first + 1 + (shift + j) % (count - 1)) % count] for j in range(replication_factor - 1)
        )
        assignment[partition] = (ordered[first], *followers)
    return assignment


def parse_replica_assignment(text: str) -> ReplicaMap:
    """kafka-topics' ``--replica-assignment``: partitions separated by ',', their replicas by ':'."""
    assignment: ReplicaMap = {}
    for partition, entry in enumerate(text.split(",")):
        try:
            replicas = tuple(int(r) for r in entry.split(":"))
        except ValueError:
            raise AdminError(
                f"bad replica assignment {text!r}: {entry!r} is not a list of broker ids"
            ) from None
        if any(r < 0 for r in replicas):
            raise AdminError(f"bad replica assignment {text!r}: broker ids cannot be negative")
        assignment[partition] = replicas
    return assignment


def check_assignment(assignment: Mapping[int, Sequence[int]], live: Collection[int]) -> None:
    """What AdminZkClient checks before writing an explicit assignment, plus that every replica is live."""
    if not assignment:
        raise AdminError("the replica assignment is empty", kind="INVALID_REPLICA_ASSIGNMENT")
    if sorted(assignment) != list(range(len(assignment))):
        raise AdminError(
            "partitions should be a consecutive 0-based integer sequence", kind="INVALID_REPLICA_ASSIGNMENT"
        )
    factors = {len(replicas) for replicas in assignment.values()}
    if 0 in factors:
        raise AdminError("Replication factor must be larger than 0.", kind="INVALID_REPLICATION_FACTOR")
    if len(factors) > 1:
        raise AdminError(
            "All partitions should have the same number of replicas", kind="INVALID_REPLICA_ASSIGNMENT"
        )
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise AdminError(
                f"Duplicate replica assignment found: {partition} -> {list(replicas)}",
                kind="INVALID_REPLICA_ASSIGNMENT",
            )
    unknown = sorted({r for replicas in assignment.values() for r in replicas} - set(live))
    if unknown:
        raise AdminError(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )


def new_topic_assignment(
    live: Sequence[int],
    partitions: int | None,
    replication_factor: int | None,
    assignment: ReplicaMap | None,
    *,
    rng: random.Random | None = None,
) -> ReplicaMap:
    """A new topic's assignment: Kafka's over the ``live`` brokers, or ``assignment`` once checked.

    With an explicit ``assignment``, ``partitions`` and ``replication_factor`` may be omitted; when given,
    they must agree with it.
    """
    if assignment is None:
        if partitions is None or replication_factor is None:
            raise AdminError(
                "the partition count and the replication factor are required without an assignment",
                kind="INVALID_REQUEST",
            )
        return assign_replicas(live, partitions, replication_factor, rng=rng)
    check_assignment(assignment, live)
    if partitions is not None and partitions != len(assignment):
        raise AdminError(
            f"{partitions} partitions requested, but the assignment has {len(assignment)}",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )
    factor = len(next(iter(assignment.values())))
    if replication_factor is not None and replication_factor != factor:
        raise AdminError(
            f"replication factor {replication_factor} requested, but the assignment has {factor}",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )
    return assignment


def check_partition_increase(topic: str, current: int, partitions: int) -> None:
    """A topic's partition count may only grow (``kafka-topics --alter --partitions``)."""
    if partitions <= current:
        raise AdminError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently has "
            f"{current} partitions, {partitions} would not be an increase.",
            kind="INVALID_PARTITIONS",
        )


def added_partitions(
    topic: str,
    existing: Mapping[int, tuple[int, ...]],
    partitions: int,
    live: Sequence[int],
    assignment: ReplicaMap | None = None,
) -> ReplicaMap:
    """The partitions that grow ``topic`` from ``existing`` to ``partitions``, and their replicas.

    As in ``AdminZkClient.addPartitions``, the new partitions start from the broker that leads partition 0
    and take its replication factor; an explicit ``assignment`` of them is checked with the existing ones.
    """
    first = existing.get(0)
    if not first:
        raise AdminError(
            f"the replica assignment of partition 0 of {topic} is missing or empty",
            kind="INVALID_REPLICA_ASSIGNMENT",
        )
    if assignment is not None:
        added = dict(assignment)
        check_assignment({**existing, **added}, live)
        return added
    start = max(0, next((i for i, b in enumerate(live) if b >= first[0]), -1))
    return assign_replicas(
        live, partitions - len(existing), len(first), start_index=start, start_partition=len(existing)
    )
