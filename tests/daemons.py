"""Process-test helpers: the daemons (from ``cluster.processes``) and ZooKeeper shortcuts for tests."""

from __future__ import annotations

from typing import Any

from cluster.admin import create_topic
from cluster.processes import BrokerProcess, ControllerProcess, DaemonProcess, Event
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

__all__ = [
    "BrokerProcess",
    "ControllerProcess",
    "DaemonProcess",
    "Event",
    "alter_partition_request",
    "create_topic",
    "partition_state",
]


async def partition_state(
    zk: AsyncZooKeeper, topic: str, partition: int
) -> tuple[znodes.LeaderIsrState, int]:
    path = znodes.partition_state_path(topic, partition)
    data, stat = await zk.get(path)
    state = znodes.decode_leader_isr_state(data, path)
    assert state is not None
    return state, stat.version


def alter_partition_request(
    broker_id: int,
    broker_epoch: int,
    topic: object,
    state: znodes.LeaderIsrState,
    partition_epoch: int,
    new_isr: list[int],
    version: int = 2,
) -> dict[str, Any]:
    """An AlterPartition body for partition 0 of ``topic`` (a topic id for v2+, a name before)."""
    partition: dict[str, Any] = {
        "partition_index": 0,
        "leader_epoch": state.leader_epoch,
        "new_isr": new_isr,
        "partition_epoch": partition_epoch,
    }
    if version >= 1:
        partition["leader_recovery_state"] = 0
    key = "topic_id" if version >= 2 else "topic_name"
    return {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "topics": [{key: topic, "partitions": [partition]}],
    }
