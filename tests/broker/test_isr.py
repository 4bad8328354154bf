"""KIP-841 with real brokers: a fenced or shutting-down follower is never put back into the ISR by its
leader, and an AlterPartition naming it is refused by the controller with INELIGIBLE_REPLICA (107).
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, epoch_of, produce
from tests.support.requests import alter_partition_request
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore import znodes

pytestmark = [pytest.mark.zookeeper, pytest.mark.secure_variant]

TOPIC = "guarded"


async def isr(cluster: Cluster) -> tuple[int, ...]:
    return (await partition_state(cluster.admin, TOPIC, 0))[0].isr


async def forged_alter_partition(cluster: Cluster, new_isr: list[int]) -> int:
    """AlterPartition v2 from the leader (broker 1), as if it proposed ``new_isr``: the partition's error."""
    state, version = await partition_state(cluster.admin, TOPIC, 0)
    data, _ = await cluster.admin.get(znodes.topic_path(TOPIC))
    assignment = znodes.decode_topic_assignment(data, znodes.topic_path(TOPIC))
    assert assignment is not None and assignment.topic_id is not None
    body = alter_partition_request(
        1, epoch_of(cluster.brokers[1]), assignment.topic_id, state, version, new_isr, 2
    )
    assert cluster.controller is not None
    reply = await cluster.controller.rpc(ApiKey.ALTER_PARTITION, 2, body)
    assert reply["error_code"] == ErrorCode.NONE
    return int(reply["topics"][0]["partitions"][0]["error_code"])


def proposals_adding(cluster: Cluster, broker: int) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.brokers[1].poll_events()
        if e["kind"] == "isr_change_proposed" and broker in e["new_isr"] and broker not in e["isr"]
    ]


async def start(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    await cluster.topic(TOPIC, {0: (1, 2, 3)})
    assert (await produce(cluster.brokers[1], TOPIC, 0, 100))["error_code"] == ErrorCode.NONE
    await wait_until(lambda: _full(cluster), timeout=30, what="every replica in the ISR")


async def _full(cluster: Cluster) -> bool:
    return await isr(cluster) == (1, 2, 3)


async def test_a_fenced_follower_is_not_put_back_until_it_registers_again(cluster: Cluster) -> None:
    await start(cluster)
    fenced = cluster.brokers[3]
    old_epoch = epoch_of(fenced)
    fenced.pause()  # past the session timeout: ZooKeeper expires it, the controller fences it
    await wait_until(lambda: _without(cluster, 3), timeout=30, what="the controller drops broker 3")
    assert await forged_alter_partition(cluster, [1, 2, 3]) == ErrorCode.INELIGIBLE_REPLICA
    assert (await produce(cluster.brokers[1], TOPIC, 0, 100))["error_code"] == ErrorCode.NONE
    assert not proposals_adding(cluster, 3)

    fenced.resume()  # it fetches at once, but is not alive in the leader's metadata until it registers
    registered = await fenced.wait_event(
        lambda e: e["kind"] == "registered" and e["broker_epoch"] > old_epoch, timeout=30, what="a new epoch"
    )
    await wait_until(lambda: _full(cluster), timeout=30, what="broker 3 back in the ISR")
    proposals = proposals_adding(cluster, 3)
    assert proposals, "the leader proposed broker 3 once it was alive again"
    assert all(p["ts"] >= registered["ts"] for p in proposals), (proposals, registered)


async def test_a_shutting_down_follower_is_not_put_back(cluster: Cluster) -> None:
    await start(cluster)
    assert cluster.controller is not None
    leaving = cluster.brokers[3]
    reply = await cluster.controller.rpc(
        ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 3, "broker_epoch": epoch_of(leaving)}
    )
    assert reply["error_code"] == ErrorCode.NONE
    assert await isr(cluster) == (1, 2)
    await leaving.wait_event(
        lambda e: e["kind"] == "stop_replica" and e["topic"] == TOPIC, what="StopReplica"
    )
    assert await forged_alter_partition(cluster, [1, 2, 3]) == ErrorCode.INELIGIBLE_REPLICA
    for _ in range(5):  # committed with acks=all by brokers 1 and 2 alone
        assert (await produce(cluster.brokers[1], TOPIC, 0, 100))["error_code"] == ErrorCode.NONE
    assert await isr(cluster) == (1, 2)
    assert not proposals_adding(cluster, 3)


async def _without(cluster: Cluster, broker: int) -> bool:
    return broker not in await isr(cluster)
