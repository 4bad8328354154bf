"""Leader elections (KIP-460) and partition reassignments (KIP-455) through the Admin API, driven by
unmodified admin clients: the brokers forward them to the active controller daemon.

confluent-kafka (librdkafka) has no reassignment calls; kafka-python has all three APIs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cluster.kafka_flags import error_name
from protocol import ApiKey, ErrorCode
from tests.support.clients import DEADLINE_S
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state, topic_replicas
from zkstore import entity_configs

pytestmark = pytest.mark.zookeeper

SESSION_S = 30.0
"""Long enough for a killed broker's ZooKeeper session to expire and the controller to act."""


async def leader_and_isr(cluster: Cluster, topic: str, partition: int) -> tuple[int, list[int]]:
    state, _ = await partition_state(cluster.admin, topic, partition)
    return state.leader, list(state.isr)


async def replicas(cluster: Cluster, topic: str) -> dict[int, tuple[int, ...]]:
    return await topic_replicas(cluster.admin, topic)


def elect(servers: str, kind: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
    """confluent-kafka's AdminClient.elect_leaders (``kind`` PREFERRED or UNCLEAN): each partition's error."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": servers})
    asked = [TopicPartition(topic, partition) for topic, partition in partitions]
    done = client.elect_leaders(ElectionType[kind], asked).result(DEADLINE_S)
    return {(tp.topic, tp.partition): error_name(e) for tp, e in done.items()}


async def test_confluent_admin_client_elects_preferred_and_unclean_leaders(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    await cluster.topic("pref", {0: (1, 2), 1: (2, 3)})
    await cluster.topic("strict", {0: (2, 3)})
    await cluster.topic("lossy", {0: (2, 3)})
    await entity_configs.change_topic_configs(
        cluster.admin, "lossy", {"unclean.leader.election.enable": "true"}
    )

    # broker 1 comes back as a follower of pref-0: its preferred leadership stays with broker 2
    cluster.restart(1)

    async def back_in_sync() -> bool:
        leader, isr = await leader_and_isr(cluster, "pref", 0)
        return leader == 2 and 1 in isr

    await wait_until(back_in_sync, what="broker 1 back in pref-0's ISR under leader 2", timeout=SESSION_S)
    servers = cluster.bootstrap()

    preferred = await asyncio.to_thread(elect, servers, "PREFERRED", [("pref", 0), ("pref", 1)])
    assert preferred == {("pref", 0): None, ("pref", 1): "ELECTION_NOT_NEEDED"}
    assert (await leader_and_isr(cluster, "pref", 0))[0] == 1

    # strict and lossy lose their whole ISR ([2]) while broker 3 is out of it
    cluster.brokers[3].kill()

    async def shrunk() -> bool:
        return [await leader_and_isr(cluster, t, 0) for t in ("strict", "lossy")] == [(2, [2])] * 2

    await wait_until(shrunk, what="broker 3 out of the ISRs", timeout=SESSION_S)
    cluster.brokers[2].kill()

    async def offline() -> bool:
        return [(await leader_and_isr(cluster, t, 0))[0] for t in ("strict", "lossy")] == [-1, -1]

    await wait_until(offline, what="strict and lossy without a leader", timeout=SESSION_S)
    cluster.restart(3)

    # lossy's own unclean.leader.election.enable lets the controller take broker 3 at once
    async def lossy_led() -> bool:
        return (await leader_and_isr(cluster, "lossy", 0)) == (3, [3])

    await wait_until(lossy_led, what="an unclean election of lossy by its topic config", timeout=SESSION_S)
    await cluster.brokers[3].wait_kind("registered")
    assert (await leader_and_isr(cluster, "strict", 0))[0] == -1
    servers = cluster.bootstrap()  # broker 3's new ports

    elected = await asyncio.to_thread(elect, servers, "UNCLEAN", [("strict", 0), ("lossy", 0)])
    missing = await asyncio.to_thread(elect, servers, "PREFERRED", [("nosuch", 0)])
    assert elected == {("strict", 0): None, ("lossy", 0): "ELECTION_NOT_NEEDED"}
    assert missing == {("nosuch", 0): "UNKNOWN_TOPIC_OR_PART"}  # librdkafka's name
    assert await leader_and_isr(cluster, "strict", 0) == (3, [3])
    controller = cluster.controller
    assert controller is not None
    unclean_events = [
        e for e in controller.poll_events() if e["kind"] == "leader_and_isr_change" and e.get("unclean")
    ]
    assert {e["topic"] for e in unclean_events} >= {"strict", "lossy"}


async def test_kafka_python_reassigns_lists_and_elects(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    servers = cluster.bootstrap()
    await cluster.topic("moving", {0: (1,), 1: (1,)})

    def reassign(moves: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], int | None]:
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            done = client.alter_partition_reassignments({TopicPartition(*tp): r for tp, r in moves.items()})
            return {(tp.topic, tp.partition): e and e.errno for tp, e in done.items()}
        finally:
            client.close()

    def listed() -> dict[tuple[str, int], dict[str, list[int]]]:
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            return {(tp.topic, tp.partition): v for tp, v in client.list_partition_reassignments().items()}
        finally:
            client.close()

    def elect() -> list[tuple[str, list[tuple[int, int]]]]:
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=servers)
        try:
            response = client.elect_leaders(0, {"moving": [0]}, raise_errors=False)
            return [(t, [tuple(p[:2]) for p in ps]) for t, ps in response.replica_election_results]
        finally:
            client.close()

    answers = await asyncio.to_thread(
        reassign, {("moving", 0): [2, 3], ("moving", 1): [1, 1], ("moving", 9): [2]}
    )
    assert answers == {
        ("moving", 0): None,
        ("moving", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("moving", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await asyncio.to_thread(reassign, {("moving", 1): [1, 4]}) == {
        ("moving", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT  # broker 4 is not alive
    }
    assert await asyncio.to_thread(reassign, {("moving", 1): None}) == {
        ("moving", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    }

    async def moved() -> bool:
        return (await replicas(cluster, "moving"))[0] == (2, 3)

    await wait_until(moved, what="moving-0 reassigned to [2, 3]", timeout=SESSION_S)
    assert (await leader_and_isr(cluster, "moving", 0))[0] == 2
    assert await asyncio.to_thread(listed) == {}
    # broker 2, moving-0's first replica now, leads it already
    assert await asyncio.to_thread(elect) == [("moving", [(0, ErrorCode.ELECTION_NOT_NEEDED)])]


async def test_a_reassignment_in_progress_is_listed_and_can_be_cancelled(cluster: Cluster) -> None:
    """Broker 3 is simulated: registered and taking control requests, it never fetches, so a move
    onto it never completes. (Unmodified clients cannot be used here: they also talk to broker 3.)"""
    await cluster.start((1, 2))
    await cluster.start_simulated(3)
    await cluster.topic("moving", {0: (1,)})
    broker = cluster.brokers[1]

    async def alter(replicas: list[int] | None) -> dict[str, Any]:
        topics = [{"name": "moving", "partitions": [{"partition_index": 0, "replicas": replicas}]}]
        return await broker.request(
            "PLAINTEXT", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": topics}
        )

    async def listed() -> list[dict[str, Any]]:
        body = {"timeout_ms": 10000, "topics": None}
        answer = await broker.request("PLAINTEXT", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body)
        assert answer["error_code"] == ErrorCode.NONE
        return list(answer["topics"])

    started = await alter([1, 3])
    assert started["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assert await listed() == [
        {
            "name": "moving",
            "partitions": [
                {"partition_index": 0, "replicas": [1, 3], "adding_replicas": [3], "removing_replicas": []}
            ],
        }
    ]
    assert (await replicas(cluster, "moving"))[0] == (1, 3)
    cancelled = await alter(None)
    assert cancelled["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE

    async def back() -> bool:
        return (await replicas(cluster, "moving"))[0] == (1,)

    await wait_until(back, what="moving-0 back on [1] after the cancellation", timeout=SESSION_S)
    assert await listed() == []
    controller = cluster.controller
    assert controller is not None
    events = [e for e in controller.poll_events() if e["kind"] == "reassignment_cancelled"]
    assert [(e["topic"], e["partition"], e["target"]) for e in events] == [("moving", 0, [1, 3])]
