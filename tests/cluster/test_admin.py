"""ZooKeeper-side administration against a real ZooKeeper: Kafka's assignment, validation and znodes."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from tests.support.zookeeper import register
from zkstore import admin, znodes
from zkstore.admin import AdminError, ReassignmentStatus
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect
from zkstore.znodes import TopicPartition

pytestmark = pytest.mark.zookeeper


async def topic_znode(zk: AsyncZooKeeper, topic: str) -> znodes.TopicAssignment:
    data, _ = await zk.get(znodes.topic_path(topic))
    assignment = znodes.decode_topic_assignment(data, znodes.topic_path(topic))
    assert assignment is not None
    return assignment


# ---------------------------------------------------------------- pure rules


def test_assignment_matches_kafkas_documented_example() -> None:
    """The table in AdminUtils' comment: 5 brokers, 10 partitions, 3 replicas, start index 0."""
    assignment = admin.assign_replicas(range(5), 10, 3, start_index=0)
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
    assignment = admin.assign_replicas([11, 12, 13, 14, 15, 16], 12, 3, rng=random.Random(seed))
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
        admin.assign_replicas([1, 2, 3], partitions, factor)
    assert str(refused.value) == message


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "a b", "tōpic", "a:b"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(AdminError):
        admin.validate_topic_name(name)


@pytest.mark.parametrize("name", ["a" * 249, "Orders.v2_eu-1", "...", "-"])
def test_legal_topic_names(name: str) -> None:
    admin.validate_topic_name(name)


def test_replica_assignment_text() -> None:
    assert admin.parse_replica_assignment("1:2,2:3,3:1") == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    for bad in ("1:x", "1,,2", "1:-2"):
        with pytest.raises(AdminError):
            admin.parse_replica_assignment(bad)


def test_plan_is_read_strictly() -> None:
    good = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}'
    )
    assert admin.parse_reassignment_plan(good) == {TopicPartition("t", 0): (1, 2)}
    twice = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}

    def entry(partition: object, replicas: object) -> str:
        return json.dumps({"partitions": [{"topic": "t", "partition": partition, "replicas": replicas}]})

    bad = {
        "not JSON": "{",
        "Not supported version": json.dumps({"version": 2, "partitions": []}),
        "cannot be empty": json.dumps({"version": 1, "partitions": []}),
        "duplicate topic partitions: t-0": json.dumps(twice),
        "'partition' must be a non-negative integer": entry(-1, []),
        "'replicas' must be a non-negative integer": entry(0, [True]),
        "log directories": '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
    }
    for reason, text in bad.items():
        with pytest.raises(AdminError, match=reason):
            admin.parse_reassignment_plan(text)


# ---------------------------------------------------------------- topics


async def test_create_assigns_over_live_brokers_in_kafkas_topic_znode(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    created = await admin.create_new_topic(zk, "orders", 6, 2, rng=random.Random(7))
    assert await topic_znode(zk, "orders") == created
    assert created.topic_id is not None
    assert sorted(created.partitions) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in created.partitions.values())
    assert Counter(r[0] for r in created.partitions.values()) == {1: 2, 2: 2, 3: 2}
    raw = json.loads((await zk.get(znodes.topic_path("orders")))[0])
    assert raw["version"] == 3
    assert raw["topic_id"] == znodes.format_topic_id(created.topic_id)

    explicit = await admin.create_new_topic(zk, "pinned", assignment={0: (3, 1), 1: (1, 2)})
    assert explicit.partitions == {0: (3, 1), 1: (1, 2)}


@pytest.mark.parametrize(
    ("topic", "partitions", "factor", "assignment", "message"),
    [
        ("orders", 1, 1, None, "Topic 'orders' already exists."),
        ("ord_ers", 1, 1, None, "collides with existing topic: ord.ers"),
        ("bad/name", 1, 1, None, "illegal"),
        ("big", 1, 4, None, "Replication factor: 4 larger than available brokers: 3."),
        ("empty", 0, 1, None, "Number of partitions must be larger than 0."),
        ("dup", None, None, {0: (1, 1)}, "Duplicate replica assignment found: 0 -> [1, 1]"),
        ("gone", None, None, {0: (1, 9)}, "Unknown broker(s) in replica assignment: 9"),
        ("uneven", None, None, {0: (1, 2), 1: (3,)}, "same number of replicas"),
        ("holes", None, None, {0: (1,), 2: (2,)}, "consecutive"),
        ("mismatch", 3, None, {0: (1,), 1: (2,)}, "3 partitions requested, but the assignment has 2"),
    ],
)
async def test_create_refusals_write_nothing(
    zk: AsyncZooKeeper,
    topic: str,
    partitions: int | None,
    factor: int | None,
    assignment: dict[int, tuple[int, ...]] | None,
    message: str,
) -> None:
    await register(zk, 1, 2, 3)
    await admin.create_topic(zk, "orders", {0: (1,)})
    await admin.create_topic(zk, "ord.ers", {0: (1,)})
    before = sorted(await zk.get_children(znodes.BROKER_TOPICS))
    with pytest.raises(AdminError) as refused:
        await admin.create_new_topic(zk, topic, partitions, factor, assignment)
    assert message in str(refused.value)
    assert sorted(await zk.get_children(znodes.BROKER_TOPICS)) == before


async def test_alter_adds_partitions_keeping_existing_replicas_and_topic_id(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    created = await admin.create_new_topic(zk, "orders", assignment={0: (2, 3), 1: (3, 1), 2: (1, 2)})
    # Kafka starts from the broker leading partition 0 (index 1 of [1, 2, 3]), at partition id 3.
    assert await admin.add_partitions(zk, "orders", 5) == {3: (2, 3), 4: (3, 1)}
    altered = await topic_znode(zk, "orders")
    assert altered.topic_id == created.topic_id
    assert altered.partitions == {**created.partitions, 3: (2, 3), 4: (3, 1)}
    for count in (5, 2):
        with pytest.raises(AdminError, match="can only be increased"):
            await admin.add_partitions(zk, "orders", count)
    with pytest.raises(AdminError, match="does not exist"):
        await admin.add_partitions(zk, "missing", 3)


async def test_delete_marks_the_topic_once(zk: AsyncZooKeeper) -> None:
    await admin.create_topic(zk, "orders", {0: (1,)})
    await admin.delete_topic(zk, "orders")
    assert await zk.get_children(znodes.DELETE_TOPICS) == ["orders"]
    assert (await zk.get(znodes.delete_topic_path("orders")))[0] in (b"", None)
    with pytest.raises(AdminError, match="already marked for deletion"):
        await admin.delete_topic(zk, "orders")
    with pytest.raises(AdminError, match="does not exist"):
        await admin.delete_topic(zk, "missing")
    assert [(t.topic, t.marked_for_deletion) for t in await admin.list_topics(zk)] == [("orders", True)]
    with pytest.raises(AdminError, match="marked for deletion"):
        await admin.add_partitions(zk, "orders", 2)


async def test_describe_reads_assignments_and_partition_states(zk: AsyncZooKeeper) -> None:
    await admin.create_topic(zk, "orders", {0: (1, 2), 1: (2, 1), 2: (1, 2)})
    state = znodes.LeaderIsrState(leader=2, leader_epoch=4, controller_epoch=1, isr=(2, 1))
    await zk.create(znodes.partition_state_path("orders", 1), state.encode(), makepath=True)
    await zk.set(znodes.partition_state_path("orders", 1), state.encode())
    offline = znodes.LeaderIsrState(leader=znodes.NO_LEADER, leader_epoch=5, controller_epoch=1, isr=(1,))
    await zk.create(znodes.partition_state_path("orders", 2), offline.encode(), makepath=True)
    partitions = await admin.describe_topics(zk)
    assert partitions == [
        admin.PartitionDescription("orders", 0, (1, 2), None, None, (), None),
        admin.PartitionDescription("orders", 1, (2, 1), 2, 4, (2, 1), 1),
        admin.PartitionDescription("orders", 2, (1, 2), -1, 5, (1,), 0),
    ]
    (summary,) = (await admin.describe(zk, ["orders"])).topics
    assert summary == admin.TopicSummary("orders", None, 3, 2, False)
    with pytest.raises(AdminError, match="Topic 'missing' does not exist"):
        await admin.describe(zk, ["missing"])
    assert await admin.describe_topics(zk) == partitions


# ---------------------------------------------------------------- brokers and controller


async def test_broker_epochs_are_the_czxids_of_their_registrations(zk: AsyncZooKeeper) -> None:
    epochs = await register(zk, 3, 1, 2)
    brokers = await admin.broker_list(zk)
    assert [b.broker_id for b in brokers] == [1, 2, 3]
    for b in brokers:
        assert b.epoch == epochs[b.broker_id] == (await zk.get(znodes.broker_path(b.broker_id)))[1].czxid
        assert b.endpoints == (f"PLAINTEXT://127.0.0.1:{9000 + b.broker_id}",)
        assert b.rack == f"rack-{b.broker_id % 2}"
    assert await admin.live_broker_ids(zk) == [1, 2, 3]


async def test_controller_and_its_epoch(zk: AsyncZooKeeper) -> None:
    assert await admin.controller_info(zk) == admin.ControllerInfo(None, None, None, None)
    payload = znodes.ControllerRegistration(100, 0, "127.0.0.1", 9999).encode()
    token = await try_elect(zk, 100, payload)
    assert token is not None
    info = await admin.controller_info(zk)
    assert info == admin.ControllerInfo(100, token.epoch, token.zk_version, "127.0.0.1:9999")


async def test_unreachable_zookeeper_is_one_clear_error() -> None:
    with pytest.raises(AdminError, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:1 "):
        async with admin.connect("127.0.0.1:1", timeout_s=0.5):
            pass


# ---------------------------------------------------------------- elections and reassignments


async def test_preferred_election_writes_kafkas_json_and_never_overwrites(zk: AsyncZooKeeper) -> None:
    await admin.create_topic(zk, "b", {0: (1, 2), 1: (2, 1)})
    await admin.create_topic(zk, "a", {0: (1, 2)})
    assert await admin.request_preferred_election(zk, "b", 1) == [("b", 1)]
    data, _ = await zk.get(znodes.PREFERRED_REPLICA_ELECTION)
    assert data == b'{"version":1,"partitions":[{"topic":"b","partition":1}]}'
    with pytest.raises(AdminError, match="currently in progress"):
        await admin.request_preferred_election(zk)
    assert (await zk.get(znodes.PREFERRED_REPLICA_ELECTION))[0] == data

    await zk.delete(znodes.PREFERRED_REPLICA_ELECTION)  # as the controller does once it is handled
    assert await admin.request_preferred_election(zk) == [("a", 0), ("b", 0), ("b", 1)]
    data, _ = await zk.get(znodes.PREFERRED_REPLICA_ELECTION)
    assert znodes.decode_preferred_replica_election(data, znodes.PREFERRED_REPLICA_ELECTION) == {
        ("a", 0),
        ("b", 0),
        ("b", 1),
    }
    await zk.delete(znodes.PREFERRED_REPLICA_ELECTION)
    for topic, partition, message in (("c", None, "does not exist"), ("b", 7, "b-7 does not exist")):
        with pytest.raises(AdminError, match=message):
            await admin.request_preferred_election(zk, topic, partition)
    assert await zk.exists(znodes.PREFERRED_REPLICA_ELECTION) is None


async def test_reassignment_is_validated_then_written_in_kafkas_json(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    await admin.create_topic(zk, "t", {0: (1, 2), 1: (2, 3)})
    refused = {
        "non-existent partitions: t-2, u-0": {TopicPartition("t", 2): (1,), TopicPartition("u", 0): (1,)},
        "cannot be empty: t-0": {TopicPartition("t", 0): ()},
        "duplicate entries: t-0 contains 3": {TopicPartition("t", 0): (3, 1, 3)},
        "non-existent brokerIDs: 4, 5": {TopicPartition("t", 0): (4, 5)},
    }
    for message, plan in refused.items():
        with pytest.raises(AdminError, match=message):
            await admin.request_reassignment(zk, plan)
    assert await zk.exists(znodes.REASSIGN_PARTITIONS) is None

    plan = {TopicPartition("t", 1): (3, 1), TopicPartition("t", 0): (3, 2)}
    assert await admin.request_reassignment(zk, plan) == {("t", 0): (1, 2), ("t", 1): (2, 3)}
    data, _ = await zk.get(znodes.REASSIGN_PARTITIONS)
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,2]},'
        b'{"topic":"t","partition":1,"replicas":[3,1]}]}'
    )
    with pytest.raises(AdminError, match="There is an existing assignment running"):
        await admin.request_reassignment(zk, plan)


async def test_generate_proposes_a_plan_and_writes_nothing(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3, 4)
    await admin.create_topic(zk, "t", {0: (1, 2), 1: (2, 1), 2: (1, 2)})
    current, proposed = await admin.generate_reassignment(zk, ["t"], [3, 4, 2], rng=random.Random(1))
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
            await admin.generate_reassignment(zk, topics, brokers)


async def test_verify_tells_completed_in_progress_and_failed(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    await admin.create_topic(zk, "t", {0: (3, 2), 1: (2, 3), 2: (1, 2)})
    pending = znodes.encode_reassignment({TopicPartition("t", 1): (1, 3)})
    await zk.create(znodes.REASSIGN_PARTITIONS, pending, makepath=True)
    plan = {TopicPartition("t", 0): (3, 2), TopicPartition("t", 1): (1, 3), TopicPartition("t", 2): (3, 1)}
    statuses = await admin.verify_reassignment(zk, plan)
    assert statuses == {
        ("t", 0): (ReassignmentStatus.COMPLETED, (3, 2)),
        ("t", 1): (ReassignmentStatus.IN_PROGRESS, (2, 3)),
        ("t", 2): (ReassignmentStatus.FAILED, (1, 2)),
    }
