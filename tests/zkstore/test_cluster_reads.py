"""Reads against a real ZooKeeper: topics and partition states, brokers with their epochs, the controller."""

from __future__ import annotations

import pytest

from placement.errors import AdminError
from tests.support.zookeeper import register
from zkstore import cluster_reads, topic_writes, znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect

pytestmark = pytest.mark.zookeeper


async def test_describe_reads_assignments_and_partition_states(zk: AsyncZooKeeper) -> None:
    await topic_writes.create_topic(zk, "orders", {0: (1, 2), 1: (2, 1), 2: (1, 2)})
    state = znodes.LeaderIsrState(leader=2, leader_epoch=4, controller_epoch=1, isr=(2, 1))
    await zk.create(znodes.partition_state_path("orders", 1), state.encode(), makepath=True)
    await zk.set(znodes.partition_state_path("orders", 1), state.encode())
    offline = znodes.LeaderIsrState(leader=znodes.NO_LEADER, leader_epoch=5, controller_epoch=1, isr=(1,))
    await zk.create(znodes.partition_state_path("orders", 2), offline.encode(), makepath=True)
    partitions = await cluster_reads.describe_topics(zk)
    assert partitions == [
        cluster_reads.PartitionDescription("orders", 0, (1, 2), None, None, (), None),
        cluster_reads.PartitionDescription("orders", 1, (2, 1), 2, 4, (2, 1), 1),
        cluster_reads.PartitionDescription("orders", 2, (1, 2), -1, 5, (1,), 0),
    ]
    (summary,) = (await cluster_reads.describe(zk, ["orders"])).topics
    assert summary == cluster_reads.TopicSummary("orders", None, 3, 2, False)
    with pytest.raises(AdminError, match="Topic 'missing' does not exist"):
        await cluster_reads.describe(zk, ["missing"])
    assert await cluster_reads.describe_topics(zk) == partitions


async def test_broker_epochs_are_the_czxids_of_their_registrations(zk: AsyncZooKeeper) -> None:
    epochs = await register(zk, 3, 1, 2)
    brokers = await cluster_reads.broker_list(zk)
    assert [b.broker_id for b in brokers] == [1, 2, 3]
    for b in brokers:
        assert b.epoch == epochs[b.broker_id] == (await zk.get(znodes.broker_path(b.broker_id)))[1].czxid
        assert b.endpoints == (f"PLAINTEXT://127.0.0.1:{9000 + b.broker_id}",)
        assert b.rack == f"rack-{b.broker_id % 2}"
    assert await cluster_reads.live_broker_ids(zk) == [1, 2, 3]


async def test_controller_and_its_epoch(zk: AsyncZooKeeper) -> None:
    assert await cluster_reads.controller_info(zk) == cluster_reads.ControllerInfo(None, None, None, None)
    payload = znodes.ControllerRegistration(100, 0, "127.0.0.1", 9999).encode()
    token = await try_elect(zk, 100, payload)
    assert token is not None
    info = await cluster_reads.controller_info(zk)
    assert info == cluster_reads.ControllerInfo(100, token.epoch, token.zk_version, "127.0.0.1:9999")
