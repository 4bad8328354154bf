"""The partition and replica state machines' transition tables: everything that decides legality.

As in Kafka, an invalid transition is not an exception: the controller logs it and skips that
partition or replica, so one inconsistent entity never blocks a batch.
"""

from __future__ import annotations

from enum import IntEnum


class PartitionState(IntEnum):
    NEW = 0
    ONLINE = 1
    OFFLINE = 2
    NON_EXISTENT = 3


class ReplicaState(IntEnum):
    NEW = 1
    ONLINE = 2
    OFFLINE = 3
    DELETION_STARTED = 4
    DELETION_SUCCESSFUL = 5
    DELETION_INELIGIBLE = 6
    NON_EXISTENT = 7


PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}
"""Target state -> the states it may be entered from."""

_ALIVE_REPLICA = frozenset(
    {ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE, ReplicaState.DELETION_INELIGIBLE}
)

REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NEW: frozenset({ReplicaState.NON_EXISTENT}),
    ReplicaState.ONLINE: _ALIVE_REPLICA,
    ReplicaState.OFFLINE: _ALIVE_REPLICA,
    ReplicaState.DELETION_STARTED: frozenset({ReplicaState.OFFLINE}),
    ReplicaState.DELETION_SUCCESSFUL: frozenset({ReplicaState.DELETION_STARTED}),
    ReplicaState.DELETION_INELIGIBLE: frozenset({ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED}),
    ReplicaState.NON_EXISTENT: frozenset({ReplicaState.DELETION_SUCCESSFUL}),
}


def partition_transition_allowed(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_PREVIOUS[target]


def replica_transition_allowed(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_PREVIOUS[target]
