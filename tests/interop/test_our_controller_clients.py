"""Clients of real Kafka 3.9 brokers reach our controller as Kafka's brokers tell them to.

With a client listener of the same name as the Kafka brokers' (``PLAINTEXT``), our controller is listed
in UpdateMetadata under it too; the Kafka brokers' Metadata then names it as the controller and lists it
as a broker hosting nothing. Kafka's AdminClient sends it CreateTopics, CreatePartitions, ElectLeaders
and DeleteTopics; idempotent producers get producer ids from it (Kafka's brokers ask it for blocks with
AllocateProducerIds, and a client that picked it as least loaded node asks it directly).
"""

from __future__ import annotations

from typing import Any

from kafkapeer.broker import KafkaBroker
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from tests.interop.conftest import KafkaBrokers
from tests.interop.java import JavaSide, ToolRun
from tests.interop.test_our_controller import CONTROLLER_ID, kafka_brokers
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from zkstore.aio import AsyncZooKeeper
from zkstore.znodes import Endpoint

CLIENT_LISTENERS = {
    "listeners": "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
}


async def controller_with_clients(cluster: Cluster) -> Any:
    controller = cluster.start_controller(
        CONTROLLER_ID,
        inter_broker_protocol_version="3.9",
        inter_broker_listener_name="INTERNAL",
        **CLIENT_LISTENERS,
    )
    await controller.wait_kind("controller_elected", timeout=30)
    return controller


async def init_producer_id(address: tuple[str, int]) -> dict[str, Any]:
    connection = await KafkaConnection.open(*address, client_id="test", connect_timeout=10)
    body = {
        "transactional_id": None,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    try:
        return (await connection.send(ApiKey.INIT_PRODUCER_ID, 4, body, timeout=10))[1]
    finally:
        await connection.close()


async def test_producer_ids_come_from_our_controller_to_kafka_brokers_and_to_clients(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """A Kafka broker at IBP 3.9 gets its block of producer ids through AllocateProducerIds; a client
    asking the controller itself gets one from the controller's own block: never the same ids."""
    controller = await controller_with_clients(cluster)
    brokers = await kafka_brokers(kafka, zk, 0)
    await controller.wait_kind("response_received", timeout=30, api="UpdateMetadata", broker=0)

    async def from_kafka() -> dict[str, Any] | None:
        answer = await init_producer_id(brokers[0].endpoint("PLAINTEXT"))
        return answer if answer["error_code"] == ErrorCode.NONE else None  # first: loading the block

    kafkas = await wait_until(from_kafka, timeout=30, what="a producer id from the Kafka broker")
    allocated = await controller.wait_kind("producer_ids_allocated", timeout=10, broker=0)
    assert allocated["first"] <= kafkas["producer_id"] <= allocated["last"]
    started = next(e for e in controller.poll_events() if e["kind"] == "controller_started")
    (client,) = started["client_endpoints"]
    endpoint = Endpoint.parse(client)
    ours = await init_producer_id((endpoint.host, endpoint.port))
    assert ours["error_code"] == ErrorCode.NONE and ours["producer_epoch"] == 0
    assert not allocated["first"] <= ours["producer_id"] <= allocated["last"]


async def test_kafkas_admin_tools_and_idempotent_clients_work_through_kafka_brokers(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper, tmp_path: Any
) -> None:
    """Kafka's own tools, bootstrapped on a Kafka broker, create, grow, describe and delete a topic and
    elect its leaders through our controller, and Kafka's console clients (idempotent producer,
    consumer group) run through it."""
    controller = await controller_with_clients(cluster)
    brokers: dict[int, KafkaBroker] = await kafka_brokers(kafka, zk, 0, 1)
    for broker_id in brokers:
        await controller.wait_kind("response_received", timeout=30, api="UpdateMetadata", broker=broker_id)
    java = JavaSide("3.9", cluster, tmp_path)
    java.config = java.write("client.properties", {"bootstrap.servers": brokers[0].bootstrap()})
    bootstrap = f"--bootstrap-server {brokers[0].bootstrap()}"
    topic = "admin39"
    lines = "".join(f"record-{i}\n" for i in range(50))
    runs = await java.tools(
        [
            ToolRun.of(
                "create",
                "kafka-topics",
                f"{bootstrap} --create --topic {topic} --partitions 2 --replication-factor 2",
            ),
            ToolRun.of("grow", "kafka-topics", f"{bootstrap} --alter --topic {topic} --partitions 3"),
            ToolRun.of(
                "elect",
                "kafka-leader-election",
                f"{bootstrap} --election-type PREFERRED --all-topic-partitions",
            ),
            ToolRun.of("produce", "kafka-console-producer", f"{bootstrap} --topic {topic}", stdin=lines),
            ToolRun.of(
                "consume",
                "kafka-console-consumer",
                f"{bootstrap} --topic {topic} --group g39 "
                "--from-beginning --max-messages 50 --timeout-ms 30000",
            ),
            ToolRun.of("describe", "kafka-topics", f"{bootstrap} --describe --topic {topic}"),
            ToolRun.of("delete", "kafka-topics", f"{bootstrap} --delete --topic {topic}"),
        ]
    )
    for name, run in runs.items():
        assert run.returncode == 0, f"{name}:\n{run.describe()}"
    assert sorted(runs["consume"].stdout.split()) == sorted(lines.split())
    assert "PartitionCount: 3" in runs["describe"].stdout
    created = controller.of_kind("topic_created")
    assert [(e["topic"], e["partitions"], e["by"]) for e in created] == [(topic, 2, "admin")]
    await controller.wait_kind("topic_deleted", timeout=60, topic=topic)
