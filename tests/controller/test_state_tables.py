"""The state machines' transition tables, checked exhaustively against Kafka's lists."""

from __future__ import annotations

import itertools

from controller.state_tables import (
    PartitionState,
    ReplicaState,
    partition_transition_allowed,
    replica_transition_allowed,
)

P = PartitionState
R = ReplicaState

# Written out from Kafka's state definitions (valid previous states per target), not from the module.
PARTITION_ALLOWED = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}

REPLICA_ALLOWED = {
    (R.NON_EXISTENT, R.NEW),
    *((s, R.ONLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    *((s, R.OFFLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE),
    (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


def test_every_partition_transition() -> None:
    for current, target in itertools.product(P, P):
        assert partition_transition_allowed(current, target) == ((current, target) in PARTITION_ALLOWED), (
            current,
            target,
        )


def test_every_replica_transition() -> None:
    for current, target in itertools.product(R, R):
        assert replica_transition_allowed(current, target) == ((current, target) in REPLICA_ALLOWED), (
            current,
            target,
        )


def test_state_values_match_kafkas_bytes() -> None:
    assert [s.value for s in P] == [0, 1, 2, 3]
    assert [s.value for s in R] == [1, 2, 3, 4, 5, 6, 7]
