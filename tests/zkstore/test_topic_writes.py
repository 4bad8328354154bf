"""Topic writes against a real ZooKeeper: names, creation over live brokers, partitions added, deletion."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from placement.errors import AdminError
from tests.support.zookeeper import register
from zkstore import cluster_reads, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper

pytestmark = pytest.mark.zookeeper


async def topic_znode(zk: AsyncZooKeeper, topic: str) -> znodes.TopicAssignment:
    data, _ = await zk.get(znodes.topic_path(topic))
    assignment = znodes.decode_topic_assignment(data, znodes.topic_path(topic))
    assert assignment is not None
    return assignment


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "a b", "tōpic", "a:b"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(AdminError):
        topic_writes.validate_topic_name(name)


@pytest.mark.parametrize("name", ["a" * 249, "Orders.v2_eu-1", "...", "-"])
def test_legal_topic_names(name: str) -> None:
    topic_writes.validate_topic_name(name)


async def test_create_assigns_over_live_brokers_in_kafkas_topic_znode(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    created = await topic_writes.create_new_topic(zk, "orders", 6, 2, rng=random.Random(7))
    assert await topic_znode(zk, "orders") == created
    assert created.topic_id is not None
    assert sorted(created.partitions) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in created.partitions.values())
    assert Counter(r[0] for r in created.partitions.values()) == {1: 2, 2: 2, 3: 2}
    raw = json.loads((await zk.get(znodes.topic_path("orders")))[0])
    assert raw["version"] == 3
    assert raw["topic_id"] == znodes.format_topic_id(created.topic_id)

    explicit = await topic_writes.create_new_topic(zk, "pinned", assignment={0: (3, 1), 1: (1, 2)})
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
    await topic_writes.create_topic(zk, "orders", {0: (1,)})
    await topic_writes.create_topic(zk, "ord.ers", {0: (1,)})
    before = sorted(await zk.get_children(znodes.BROKER_TOPICS))
    with pytest.raises(AdminError) as refused:
        await topic_writes.create_new_topic(zk, topic, partitions, factor, assignment)
    assert message in str(refused.value)
    assert sorted(await zk.get_children(znodes.BROKER_TOPICS)) == before


async def test_alter_adds_partitions_keeping_existing_replicas_and_topic_id(zk: AsyncZooKeeper) -> None:
    await register(zk, 1, 2, 3)
    created = await topic_writes.create_new_topic(zk, "orders", assignment={0: (2, 3), 1: (3, 1), 2: (1, 2)})
    # Kafka starts from the broker leading partition 0 (index 1 of [1, 2, 3]), at partition id 3.
    assert await topic_writes.add_partitions(zk, "orders", 5) == {3: (2, 3), 4: (3, 1)}
    altered = await topic_znode(zk, "orders")
    assert altered.topic_id == created.topic_id
    assert altered.partitions == {**created.partitions, 3: (2, 3), 4: (3, 1)}
    for count in (5, 2):
        with pytest.raises(AdminError, match="can only be increased"):
            await topic_writes.add_partitions(zk, "orders", count)
    with pytest.raises(AdminError, match="does not exist"):
        await topic_writes.add_partitions(zk, "missing", 3)


async def test_delete_marks_the_topic_once(zk: AsyncZooKeeper) -> None:
    await topic_writes.create_topic(zk, "orders", {0: (1,)})
    await topic_writes.delete_topic(zk, "orders")
    assert await zk.get_children(znodes.DELETE_TOPICS) == ["orders"]
    assert (await zk.get(znodes.delete_topic_path("orders")))[0] in (b"", None)
    with pytest.raises(AdminError, match="already marked for deletion"):
        await topic_writes.delete_topic(zk, "orders")
    with pytest.raises(AdminError, match="does not exist"):
        await topic_writes.delete_topic(zk, "missing")
    assert [(t.topic, t.marked_for_deletion) for t in await cluster_reads.list_topics(zk)] == [
        ("orders", True)
    ]
    with pytest.raises(AdminError, match="marked for deletion"):
        await topic_writes.add_partitions(zk, "orders", 2)
