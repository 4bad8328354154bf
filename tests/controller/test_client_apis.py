"""The controller at IBP 3.9 answering what clients of Kafka brokers send it (controller/client_apis.py),
and Kafka brokers' AllocateProducerIds, against real daemons: our brokers at IBP 3.9 list it as a
broker hosting nothing, as Kafka's would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cluster.processes import BrokerProcess, ControllerProcess
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, epoch_of

pytestmark = pytest.mark.zookeeper

IBP = {"inter_broker_protocol_version": "3.9"}
METADATA = {
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


async def ask(address: tuple[str, int], key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    connection = await KafkaConnection.open(*address, client_id="test-client", connect_timeout=10)
    try:
        return (await connection.send(key, version, body, timeout=20))[1]
    finally:
        await connection.close()


async def cluster_at_39(cluster: Cluster) -> tuple[ControllerProcess, dict[int, BrokerProcess]]:
    controller = cluster.start_controller(1001, **IBP)
    await controller.wait_kind("controller_elected", timeout=30)
    brokers = {i: cluster.broker(i, **IBP) for i in (1, 2)}
    for broker in brokers.values():
        await broker.wait_kind("broker_started", timeout=30)
    for i in brokers:
        await controller.wait_kind("response_received", timeout=30, api="UpdateMetadata", broker=i)
    return controller, brokers


def create_topics(name: str, partitions: int) -> dict[str, Any]:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 2, "assignments": [],
             "configs": []}  # fmt: skip
    return {"topics": [topic], "timeout_ms": 20000, "validate_only": False}


async def test_the_active_controller_creates_a_topic_every_broker_knows_when_it_answers(
    cluster: Cluster,
) -> None:
    controller, brokers = await cluster_at_39(cluster)
    rpc = controller.rpc_address()
    created = await ask(rpc, ApiKey.CREATE_TOPICS, 7, create_topics("told", 3))
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [("told", 0, 3)]
    # answered only once every broker was told: each one's Metadata shows the topic led at once
    for broker in brokers.values():
        seen = await ask(
            broker.endpoint("PLAINTEXT"), ApiKey.METADATA, 8, {"topics": [{"name": "told"}], **METADATA}
        )
        (topic,) = seen["topics"]
        assert topic["error_code"] == 0 and len(topic["partitions"]) == 3
        assert all(p["leader_id"] in brokers for p in topic["partitions"])
        assert seen["controller_id"] == 1001 and 1001 in {b["node_id"] for b in seen["brokers"]}

    metadata = await ask(rpc, ApiKey.METADATA, 8, {"topics": None, **METADATA})
    assert metadata["controller_id"] == 1001
    assert {b["node_id"]: (b["host"], b["port"]) for b in metadata["brokers"]}[1001] == rpc
    assert sorted(b["node_id"] for b in metadata["brokers"]) == [1, 2, 1001]
    (told,) = metadata["topics"]
    assert all(1001 not in p["replica_nodes"] for p in told["partitions"])

    found = await ask(rpc, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
    assert found["coordinators"][0]["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE  # no offsets topic

    deleted = await ask(rpc, ApiKey.DELETE_TOPICS, 5, {"topic_names": ["told"], "timeout_ms": 30000})
    assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [("told", 0)]
    await controller.wait_kind("topic_deleted", timeout=30, topic="told")


async def test_allocate_producer_ids_checks_the_broker_and_its_epoch(cluster: Cluster) -> None:
    controller, brokers = await cluster_at_39(cluster)
    rpc = controller.rpc_address()
    epoch = epoch_of(brokers[1])

    async def allocate(broker_id: int, broker_epoch: int) -> dict[str, Any]:
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch}
        return await ask(rpc, ApiKey.ALLOCATE_PRODUCER_IDS, 0, body)

    assert (await allocate(7, 1))["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED
    assert (await allocate(1, epoch - 1))["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    first, second = await allocate(1, epoch), await allocate(2, -1)
    assert (first["error_code"], first["producer_id_len"], second["error_code"]) == (0, 1000, 0)
    assert second["producer_id_start"] >= first["producer_id_start"] + 1000  # never the same ids


async def test_a_standby_refuses_topic_requests_and_sends_clients_elsewhere(cluster: Cluster) -> None:
    await cluster_at_39(cluster)
    standby = cluster.start_controller(1002, **IBP)
    await standby.wait_kind("controller_started", timeout=30)
    address = standby.rpc_address()
    refused = await ask(address, ApiKey.CREATE_TOPICS, 7, create_topics("nope", 1))
    assert refused["topics"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await ask(address, ApiKey.METADATA, 8, {"topics": None, **METADATA})
    assert (await ask(address, ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": -1}))[
        "error_code"
    ] == ErrorCode.NOT_CONTROLLER
