"""Our controller at IBP 3.9 drives real Apache Kafka 3.9 brokers at IBP 3.9, on Kafka 3.9's wire.

LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 (Kafka's layout) go to the Kafka brokers; they
find our controller as Kafka brokers find any controller, among UpdateMetadata's live brokers (it
lists itself there, its RPC listener under their inter-broker listener's name), and send it
AlterPartition v3 and ControlledShutdown v3. Our controller starts first: every Kafka broker runs a
KafkaController of its own that claims ``/controller`` whenever it is free.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cluster.processes import ControllerProcess, Event
from kafkapeer.broker import KafkaBroker
from network.connection import KafkaConnection
from protocol import ApiKey
from tests.interop.conftest import KafkaBrokers
from tests.interop.test_kafka_broker import registration
from tests.support.clients import confluent_round_trip
from tests.support.cluster import Cluster
from zkserver.ports import free_ports
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic, delete_topic

CONTROLLER_ID = 1001
KAFKA_SETTINGS: dict[str, object] = {
    "inter.broker.protocol.version": "3.9",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "replica.lag.time.max.ms": 2000,
}
"""IBP 3.9 (kafkapeer's default too, said here for the reader); clients on PLAINTEXT, brokers and our
controller on INTERNAL, the only listener name our controller is listed under (clients that saw it
would take it for a broker without Metadata); a follower that stops fetching leaves the ISR after 2 s,
well before its 6 s ZooKeeper session expires."""


async def our_controller(cluster: Cluster, **overrides: object) -> ControllerProcess:
    """Our controller at IBP 3.9, elected before any Kafka broker can claim ``/controller``."""
    controller = cluster.start_controller(
        CONTROLLER_ID, inter_broker_protocol_version="3.9", inter_broker_listener_name="INTERNAL", **overrides
    )
    await controller.wait_kind("controller_elected", timeout=30)
    return controller


async def kafka_brokers(kafka: KafkaBrokers, zk: AsyncZooKeeper, *ids: int) -> dict[int, KafkaBroker]:
    brokers = {}
    for i in ids:
        clients, internal = free_ports(2)
        listeners = f"PLAINTEXT://127.0.0.1:{clients},INTERNAL://127.0.0.1:{internal}"
        brokers[i] = kafka.broker(i, listeners=listeners, **KAFKA_SETTINGS)
    for broker in brokers.values():
        await registration(zk, broker)
    return brokers


def answered(api: str, broker: int, **fields: Any) -> Any:
    """A response_received event of ``api`` from ``broker`` with ``fields``."""

    def check(event: Event) -> bool:
        return (
            event["kind"] == "response_received"
            and event["api"] == api
            and event["broker"] == broker
            and all(event.get(k) == v for k, v in fields.items())
        )

    return check


def isr_written(topic: str, isr: list[int], reason: str) -> Any:
    def check(event: Event) -> bool:
        return (
            event["kind"] == "leader_and_isr_change"
            and event["topic"] == topic
            and event["isr"] == isr
            and event.get("reason") == reason
        )

    return check


async def test_topics_created_through_zookeeper_are_led_by_kafka_brokers_on_kafkas_wire(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    controller = await our_controller(cluster)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "wire39", {0: (0, 1), 1: (1, 0)})
    for broker_id in brokers:
        lai = await controller.wait_event(
            answered("LeaderAndIsr", broker_id, partitions=2),
            timeout=30,
            what=f"LeaderAndIsr v7 to {broker_id}",
        )
        assert (lai["api_version"], lai["error"], lai["partition_errors"]) == (7, "NONE", 0)
        um = await controller.wait_event(answered("UpdateMetadata", broker_id, partitions=2), timeout=30)
        assert (um["api_version"], um["error"]) == (8, "NONE")
    records = [(p, f"k{i}".encode(), f"v{i}".encode()) for i in range(20) for p in (0, 1)]
    got = await asyncio.to_thread(confluent_round_trip, brokers[0].bootstrap(), "wire39", records)
    assert sorted(got) == sorted(records)


def produce_acks_1(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records to partition 0, acknowledged by the leader alone."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "enable.idempotence": False})
    for i in range(count):
        producer.produce(topic, key=f"late{i}".encode(), value=b"v", partition=0)
    if producer.flush(20):
        raise KafkaException(f"{count} records to {topic} not acknowledged")


def clients_view(bootstrap: str) -> Any:
    """A Kafka client's view of the cluster from a broker's Metadata: brokers, controller id, topics."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)


async def metadata(broker: KafkaBroker, listener: str) -> dict[str, Any]:
    """Metadata v8 for every topic, asked of ``broker`` on ``listener``."""
    host, port = broker.endpoint(listener)
    connection = await KafkaConnection.open(host, port, client_id="test", connect_timeout=10)
    body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    try:
        return (await connection.send(ApiKey.METADATA, 8, body, timeout=10))[1]
    finally:
        await connection.close()


async def test_kafka_brokers_see_our_controller_as_a_live_broker_that_hosts_nothing(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Listed among UpdateMetadata's live brokers under the inter-broker listener's name, our controller
    is, on that listener, a broker without partitions; clients on another listener never see it, only
    its id as the controller's. No fetcher points at it, and the replicas a Kafka broker places on it
    when it creates ``__consumer_offsets`` go to brokers."""
    controller = await our_controller(cluster)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "hosted", {0: (0, 1), 1: (1, 0)})
    await controller.wait_event(answered("UpdateMetadata", 0, partitions=2), timeout=30)
    internal = await metadata(brokers[0], "INTERNAL")
    nodes = {b["node_id"]: (b["host"], b["port"]) for b in internal["brokers"]}
    assert internal["controller_id"] == CONTROLLER_ID
    assert nodes[CONTROLLER_ID] == controller.rpc_address() and sorted(nodes) == [0, 1, CONTROLLER_ID]
    (hosted,) = (t for t in internal["topics"] if t["name"] == "hosted")
    assert all(CONTROLLER_ID not in (p["leader_id"], *p["replica_nodes"]) for p in hosted["partitions"])
    view = await asyncio.to_thread(clients_view, brokers[0].bootstrap())
    assert sorted(view.brokers) == [0, 1] and view.controller_id == CONTROLLER_ID

    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
    assert await asyncio.to_thread(confluent_round_trip, brokers[1].bootstrap(), "hosted", records) == records
    # The consumer's FindCoordinator made a Kafka broker create __consumer_offsets over its live brokers.
    offsets = "__consumer_offsets"
    moved = await controller.wait_kind("replicas_moved_off_controller", timeout=30, topic=offsets)
    assert moved["partitions"] and all(CONTROLLER_ID not in r for r in moved["replicas"].values())
    data, _ = await zk.get(znodes.topic_path(offsets))
    assignment = znodes.decode_topic_assignment(data, znodes.topic_path(offsets))
    assert assignment is not None
    assert {r for replicas in assignment.partitions.values() for r in replicas} == {0, 1}
    assert not [e for e in controller.of_kind("state_change_failed") if e["topic"] == offsets]
    for broker in brokers.values():
        assert broker.log_lines(f"leaderId={CONTROLLER_ID}") == []  # no replica fetcher towards it


async def test_a_kafka_leader_shrinks_and_expands_the_isr_through_alter_partition_v3(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Kafka's leader finds our controller in its metadata, asks ApiVersions, and sends AlterPartition v3
    (every member's epoch -1, as ZooKeeper-mode brokers send them): out goes the follower it lost,
    back comes the follower that caught up after its restart."""
    controller = await our_controller(cluster)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "isr39", {0: (0, 1)})
    await controller.wait_event(answered("LeaderAndIsr", 1, partitions=1), timeout=30)
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
    assert await asyncio.to_thread(confluent_round_trip, brokers[0].bootstrap(), "isr39", records) == records

    brokers[1].kill()
    # A follower is out of sync only once the leader has records it lacks (Kafka's isCaughtUp).
    await asyncio.to_thread(produce_acks_1, brokers[0].bootstrap(), "isr39", 5)
    await controller.wait_event(isr_written("isr39", [0], "AlterPartition from broker 0"), timeout=20)
    shrink = controller.of_kind("alter_partition_handled")[-1]
    assert (shrink["api_version"], shrink["broker"], shrink["changed"], shrink["rejected"]) == (3, 0, 1, 0)
    await controller.wait_event(lambda e: e["kind"] == "broker_change" and 1 in e["dead"], timeout=20)

    brokers[1].start()
    await registration(zk, brokers[1])
    await controller.wait_event(isr_written("isr39", [0, 1], "AlterPartition from broker 0"), timeout=30)
    expand = controller.of_kind("alter_partition_handled")[-1]
    assert (expand["api_version"], expand["changed"]) == (3, 1)
    assert not controller.of_kind("rpc_rejected")


async def test_a_kafka_brokers_controlled_shutdown_moves_its_leadership_before_it_stops(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """SIGTERM: the Kafka broker sends ControlledShutdown v3 to our controller, which elects the other
    broker for what it led and answers with nothing remaining; only then does the broker go away."""
    controller = await our_controller(cluster)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "moving39", {0: (0, 1), 1: (1, 0)})
    await controller.wait_event(answered("LeaderAndIsr", 0, partitions=2), timeout=30)
    await controller.wait_event(answered("LeaderAndIsr", 1, partitions=2), timeout=30)

    await asyncio.to_thread(brokers[0].stop, 30)
    started = await controller.wait_kind("controlled_shutdown_started", broker=0)
    assert started["api_version"] == 3
    handled = await controller.wait_kind("controlled_shutdown_handled", broker=0)
    assert (handled["led"], handled["followed"], handled["remaining"]) == (1, 1, 0)
    gone = await controller.wait_event(lambda e: e["kind"] == "broker_change" and 0 in e["dead"], timeout=20)
    events = controller.poll_events()
    moved = [
        (e["partition"], e["leader"])
        for e in events
        if e["kind"] == "leader_and_isr_change" and e["reason"] == "controlled_shutdown election"
    ]
    assert moved == [(0, 1)] and events.index(handled) < events.index(gone)
    assert brokers[0].log_lines("Controlled shutdown request returned successfully")

    records = [(p, f"k{i}".encode(), f"v{i}".encode()) for i in range(10) for p in (0, 1)]
    got = await asyncio.to_thread(confluent_round_trip, brokers[1].bootstrap(), "moving39", records)
    assert sorted(got) == sorted(records)


async def test_a_bounced_kafka_broker_is_detected_by_its_new_czxid(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """KIP-380 with a real Kafka broker: it dies and registers again while our controller cannot look
    (paused; its own session outlives the pause), so only the registration's higher czxid tells the
    controller it is a new incarnation, which then gets LeaderAndIsr v7 with its new epoch."""
    controller = await our_controller(cluster, zookeeper_session_timeout_ms=20000)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "bounce39", {0: (1, 0)})
    await controller.wait_event(answered("LeaderAndIsr", 1, partitions=1), timeout=30)
    _, first = await registration(zk, brokers[1])

    path = f"{znodes.BROKER_IDS}/1"
    controller.pause()
    try:
        brokers[1].kill()
        deadline = asyncio.get_running_loop().time() + 15
        while await zk.exists(path) is not None:  # until Kafka's 6 s session expires
            assert asyncio.get_running_loop().time() < deadline, (
                "broker 1's registration outlived its session"
            )
            await asyncio.sleep(0.1)
        brokers[1].start()
        _, second = await registration(zk, brokers[1])
    finally:
        controller.resume()
    assert second > first

    change = await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and e["bounced"] == [1], timeout=20, what="broker 1 bounced"
    )
    assert change["dead"] == [] and change["new"] == []
    assert (change["previous_epochs"]["1"], change["epochs"]["1"]) == (first, second)
    lai = await controller.wait_event(answered("LeaderAndIsr", 1, broker_epoch=second), timeout=30)
    assert (lai["api_version"], lai["error"], lai["partition_errors"]) == (7, "NONE", 0)


async def test_a_topic_on_kafka_brokers_is_deleted_through_stop_replica_v4(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Deletion in Kafka's StopReplica v4 layout: one request per broker, each partition with its delete
    flag and leader epoch -2; the brokers' answers by topic name complete the deletion."""
    controller = await our_controller(cluster)
    brokers = await kafka_brokers(kafka, zk, 0, 1)
    await create_topic(zk, "doomed39", {0: (0, 1), 1: (1, 0)})
    await controller.wait_event(answered("LeaderAndIsr", 1, partitions=2), timeout=30)
    records = [(p, f"k{i}".encode(), f"v{i}".encode()) for i in range(10) for p in (0, 1)]
    got = await asyncio.to_thread(confluent_round_trip, brokers[0].bootstrap(), "doomed39", records)
    assert sorted(got) == sorted(records)

    await delete_topic(zk, "doomed39")
    await controller.wait_kind("topic_deleted", timeout=30, topic="doomed39")
    stops = [
        e for e in controller.of_kind("response_received") if e["api"] == "StopReplica" and e.get("deleted")
    ]
    assert sorted(e["broker"] for e in stops) == [0, 1]
    assert all(
        (e["api_version"], e["error"], e["partition_errors"], e["deleted"]) == (4, "NONE", 0, 2)
        for e in stops
    )
    assert await zk.exists(znodes.topic_path("doomed39")) is None
    for broker in brokers.values():
        assert not list((broker.dir / "data").glob("doomed39-[01]")), "a replica's log survived"
