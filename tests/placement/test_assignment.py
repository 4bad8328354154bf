"""Kafka's replica assignment and the text of an explicit one: pure rules, no ZooKeeper."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from placement.assignment import assign_replicas, parse_replica_assignment
from placement.errors import AdminError


def test_assignment_matches_kafkas_documented_example() -> None:
    """The table in AdminUtils' comment: 5 brokers, 10 partitions, 3 replicas, start index 0."""
    assignment = assign_replicas(range(5), 10, 3, start_index=0)
    assert assignment == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


@pytest.mark.parametrize("seed", range(5))
def test_random_start_still_spreads_leaders_and_replicas_evenly(seed: int) -> None:
    assignment = assign_replicas([11, 12, 13, 14, 15, 16], 12, 3, rng=random.Random(seed))
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == dict.fromkeys(range(11, 17), 2)
    assert Counter(b for r in assignment.values() for b in r) == dict.fromkeys(range(11, 17), 6)


@pytest.mark.parametrize(
    ("partitions", "factor", "message"),
    [
        (0, 1, "Number of partitions must be larger than 0."),
        (3, 0, "Replication factor must be larger than 0."),
        (3, 4, "Replication factor: 4 larger than available brokers: 3."),
    ],
)
def test_assignment_refuses_what_kafka_refuses(partitions: int, factor: int, message: str) -> None:
    with pytest.raises(AdminError) as refused:
        assign_replicas([1, 2, 3], partitions, factor)
    assert str(refused.value) == message


def test_replica_assignment_text() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    for bad in ("1:x", "1,,2", "1:-2"):
        with pytest.raises(AdminError):
            parse_replica_assignment(bad)
