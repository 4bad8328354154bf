"""A topic deleted and created again under the same name is a new topic with a new id (KIP-516), and
a broker that led the old one must use the new id: the controller refuses an AlterPartition naming
the old id (UNKNOWN_TOPIC_ID), so a broker that kept it could never change that ISR again."""

from __future__ import annotations

import pytest

from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore import znodes
from zkstore.topic_writes import create_topic, delete_topic

pytestmark = pytest.mark.zookeeper

TOPIC = "recycled"


async def full_isr_after_restarting_2(cluster: Cluster) -> None:
    """Broker 2 leaves the ISR when it dies; once back, leader 1 must propose it with AlterPartition."""
    cluster.restart(2)

    async def full() -> bool:
        return (await partition_state(cluster.admin, TOPIC, 0))[0].isr == (1, 2)

    await wait_until(lambda: _shrunk(cluster), timeout=30, what="broker 2 out of the ISR")
    await wait_until(full, timeout=30, what="broker 2 back in the ISR")


async def _shrunk(cluster: Cluster) -> bool:
    return (await partition_state(cluster.admin, TOPIC, 0))[0].isr == (1,)


async def test_a_recreated_topic_is_altered_under_its_new_id(cluster: Cluster) -> None:
    await cluster.start((1, 2))
    await cluster.topic(TOPIC, {0: (1, 2)})
    old_id = await cluster.topic_id(TOPIC)
    await full_isr_after_restarting_2(cluster)  # broker 1 has now used the topic's id

    await delete_topic(cluster.admin, TOPIC)

    async def gone() -> bool:
        return await cluster.admin.exists(znodes.topic_path(TOPIC)) is None

    await wait_until(gone, timeout=30, what="the topic deleted")
    await create_topic(cluster.admin, TOPIC, {0: (1, 2)})

    async def new_id() -> bool:
        data, _ = await cluster.admin.get(znodes.topic_path(TOPIC))
        assignment = znodes.decode_topic_assignment(data, znodes.topic_path(TOPIC))
        return assignment is not None and assignment.topic_id not in (None, old_id)

    await wait_until(new_id, timeout=30, what="the new topic's id")
    await full_isr_after_restarting_2(cluster)
