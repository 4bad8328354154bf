"""Requests to the controller against a real ZooKeeper: preferred elections, reassignments (Kafka's JSON)."""

from __future__ import annotations

import random

import pytest

from placement.errors import AdminError
from tests.support.zookeeper import register
from zkstore import controller_requests, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.controller_requests import ReassignmentStatus
from zkstore.znodes import TopicPartition

pytestmark = pytest.mark.zookeeper


async def topic_znode(zk: AsyncZooKeeper, topic: str) -> znodes.TopicAssignment:
    data, _ = await zk.get(znodes.topic_path(topic))
    assignment = znodes.decode_topic_assignment(data, znodes.topic_path(topic))
    assert assignment is not None
    return assignment


async def test_preferred_election_writes_kafkas_json_and_never_overwrites(zk: AsyncZooKeeper) -> None:
    await topic_writes.create_topic(zk, "b", {0: (1, 2), 1: (2, 1)})
    await topic_writes.create_topic(zk, "a", {0: (1, 2)})
    assert await controller_requests.request_preferred_election(zk, "b", 1) == [("b", 1)]
    data, _ = await zk.get(znodes.PREFERRED_REPLICA_ELECTION)
    assert data == b'{"version":1,"partitions":[{"topic":"b","partition":1}]}'
    with pytest.raises(AdminError, match="currently in progress"):
        await controller_requests.request_preferred_election(zk)
    assert (await zk.get(znodes.PREFERRED_REPLICA_ELECTION))[0] == data

    await zk.delete(znodes.PREFERRED_REPLICA_ELECTION)  # as the controller does once it is handled
    assert await controller_requests.request_preferred_election(zk) == [("a", 0), ("b", 0), ("b", 1)]
    data, _ = await zk.get(znodes.PREFERRED_REPLICA_ELECTION)
    assert znodes.decode_preferred_replica_election(data, znodes.PREFERRED_REPLICA_ELECTION) == {
        ("a", 0),
        ("b", 0),
        ("b", 1),
    }
    await zk.delete(znodes.PREFERRED_REPLICA_ELECTION)
    for topic, partition, message in (("c", None, "does not exist"), ("b", 7, "b-7 does not exist")):
        with pytest.raises(AdminError, match=message):
            await controller_requests.request_preferred_election(zk, topic, partition)
    assert await zk.exists(znodes.PREFERRED_REPLICA_ELECTION) is None


async def test_reassignment_is_validated_then_written_in_kafkas_json(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    await topic_writes.create_topic(zk, "t", {0: (1, 2), 1: (2, 3)})
    refused = {
        "non-existent partitions: t-2, u-0": {TopicPartition("t", 2): (1,), TopicPartition("u", 0): (1,)},
        "cannot be empty: t-0": {TopicPartition("t", 0): ()},
        "duplicate entries: t-0 contains 3": {TopicPartition("t", 0): (3, 1, 3)},
        "non-existent brokerIDs: 4, 5": {TopicPartition("t", 0): (4, 5)},
    }
    for message, plan in refused.items():
        with pytest.raises(AdminError, match=message):
            await controller_requests.request_reassignment(zk, plan)
    assert await zk.exists(znodes.REASSIGN_PARTITIONS) is None

    plan = {TopicPartition("t", 1): (3, 1), TopicPartition("t", 0): (3, 2)}
    assert await controller_requests.request_reassignment(zk, plan) == {("t", 0): (1, 2), ("t", 1): (2, 3)}
    data, _ = await zk.get(znodes.REASSIGN_PARTITIONS)
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,2]},'
        b'{"topic":"t","partition":1,"replicas":[3,1]}]}'
    )
    with pytest.raises(AdminError, match="There is an existing assignment running"):
        await controller_requests.request_reassignment(zk, plan)


async def test_generate_proposes_a_plan_and_writes_nothing(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3, 4)
    await topic_writes.create_topic(zk, "t", {0: (1, 2), 1: (2, 1), 2: (1, 2)})
    current, proposed = await controller_requests.generate_reassignment(
        zk, ["t"], [3, 4, 2], rng=random.Random(1)
    )
    assert current == {("t", 0): (1, 2), ("t", 1): (2, 1), ("t", 2): (1, 2)}
    assert sorted(proposed) == sorted(current)
    assert all(len(set(r)) == 2 and set(r) <= {2, 3, 4} for r in proposed.values())
    assert await zk.exists(znodes.REASSIGN_PARTITIONS) is None
    assert (await topic_znode(zk, "t")).partitions == {0: (1, 2), 1: (2, 1), 2: (1, 2)}
    for topics, brokers, message in (
        (["t"], [2, 9], "not available: 9"),
        (["t"], [2, 2], "duplicate entries: 2"),
        (["nope"], [2, 3], "Topic 'nope' does not exist"),
        (["t"], [2], "Replication factor: 2 larger than available brokers: 1."),
    ):
        with pytest.raises(AdminError, match=message):
            await controller_requests.generate_reassignment(zk, topics, brokers)


async def test_verify_tells_completed_in_progress_and_failed(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    await topic_writes.create_topic(zk, "t", {0: (3, 2), 1: (2, 3), 2: (1, 2)})
    pending = znodes.encode_reassignment({TopicPartition("t", 1): (1, 3)})
    await zk.create(znodes.REASSIGN_PARTITIONS, pending, makepath=True)
    plan = {TopicPartition("t", 0): (3, 2), TopicPartition("t", 1): (1, 3), TopicPartition("t", 2): (3, 1)}
    statuses = await controller_requests.verify_reassignment(zk, plan)
    assert statuses == {
        ("t", 0): (ReassignmentStatus.COMPLETED, (3, 2)),
        ("t", 1): (ReassignmentStatus.IN_PROGRESS, (2, 3)),
        ("t", 2): (ReassignmentStatus.FAILED, (1, 2)),
    }
