"""A real Kafka 3.9 broker in the project's ZooKeeper, seen by the project's znode readers and controller."""

from __future__ import annotations

import asyncio

from kafkapeer.broker import KafkaBroker
from tests.interop.conftest import KafkaBrokers
from tests.support.clients import confluent_consume, confluent_round_trip
from tests.support.cluster import Cluster
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic

REGISTRATION_TIMEOUT_S = 90.0


async def registration(zk: AsyncZooKeeper, broker: KafkaBroker) -> tuple[znodes.BrokerRegistration, int]:
    """Kafka's own ``/brokers/ids/N`` through our decoder, with its czxid; waits for it to appear."""
    path = f"{znodes.BROKER_IDS}/{broker.broker_id}"
    deadline = asyncio.get_running_loop().time() + REGISTRATION_TIMEOUT_S
    while True:
        broker.check_running()
        stat = await zk.exists(path)
        if stat is not None:
            data, stat = await zk.get(path)
            decoded = znodes.decode_broker_registration(data, path)
            assert decoded is not None, f"our reader refused Kafka's registration: {data!r}"
            return decoded, stat.czxid
        assert asyncio.get_running_loop().time() < deadline, (
            f"{broker.name} never registered:\n{broker.tail()}"
        )
        await asyncio.sleep(0.2)


async def beside_ours(
    kafka: KafkaBrokers, zk: AsyncZooKeeper, broker_id: int, **overrides: object
) -> KafkaBroker:
    """A registered Kafka broker with our brokers' listener names (a CONTROLLER control plane beside
    PLAINTEXT), on 2.2's control-plane wire, which both implementations speak; the first one started
    in a cluster without a controller of ours wins ``/controller``."""
    broker = kafka.like_ours(broker_id, "2.2", **overrides)
    await registration(zk, broker)
    return broker


async def wait_for_leader(zk: AsyncZooKeeper, topic: str, leader: int, broker: KafkaBroker) -> None:
    path = f"{znodes.BROKER_TOPICS}/{topic}/partitions/0/state"
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        data, _ = await zk.get(path)
        state = znodes.decode_leader_isr_state(data, path)
        if state is not None and state.leader == leader:
            return
        late = asyncio.get_running_loop().time() > deadline
        assert not late, f"{topic}-0 never led by {leader}:\n{broker.tail()}"
        await asyncio.sleep(0.2)


async def test_a_kafka_39_broker_registers_json_our_reader_decodes(
    kafka: KafkaBrokers, zk: AsyncZooKeeper
) -> None:
    broker = kafka.broker(0)
    decoded, czxid = await registration(zk, broker)
    assert decoded.broker_id == 0
    (endpoint,) = decoded.endpoints
    assert (endpoint.listener_name, endpoint.host) == ("PLAINTEXT", "127.0.0.1")
    assert decoded.listener_security_protocol_map["PLAINTEXT"] == "PLAINTEXT"
    assert czxid > 0


async def test_our_controller_sees_a_kafka_broker_join_die_and_come_back_with_a_new_epoch(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """KIP-380 across implementations: Kafka's registration czxid is the epoch our controller tracks."""
    controller = cluster.start_controller(1001, inter_broker_protocol_version="2.2")
    await controller.wait_kind("controller_elected", timeout=60)
    broker = kafka.broker(0)
    _, first_epoch = await registration(zk, broker)
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and e.get("epochs", {}).get("0") == first_epoch,
        timeout=60,
        what=f"broker 0 new with epoch {first_epoch}",
    )
    broker.kill()
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and 0 in e.get("dead", []), timeout=60, what="broker 0 dead"
    )
    broker.start()
    _, second_epoch = await registration(zk, broker)
    assert second_epoch > first_epoch
    await controller.wait_event(
        lambda e: e["kind"] == "broker_change" and e.get("epochs", {}).get("0") == second_epoch,
        timeout=60,
        what=f"broker 0 back with epoch {second_epoch}",
    )


async def test_our_controller_makes_a_kafka_broker_the_leader_clients_produce_to(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Kafka's wire of 2.2 (LeaderAndIsr v2, UpdateMetadata v5), which Kafka 3.9 still takes: our
    controller drives a real Kafka broker, whose clients then produce to and consume from it."""
    controller = cluster.start_controller(1001, inter_broker_protocol_version="2.2")
    await controller.wait_kind("controller_elected", timeout=60)
    broker = kafka.broker(0)
    await registration(zk, broker)
    await create_topic(zk, "mixed", {0: (0,), 1: (0,)})

    def answered(event: dict[str, object]) -> bool:
        return (
            event["kind"] == "response_received"
            and event["api"] == "LeaderAndIsr"
            and event["broker"] == 0
            and event.get("partitions") == 2
        )

    accepted = await controller.wait_event(
        answered, timeout=60, what="LeaderAndIsr for mixed answered by Kafka"
    )
    assert (accepted["error"], accepted["partition_errors"]) == ("NONE", 0)
    records = [(p, f"k{i}".encode(), f"v{i}".encode()) for i in range(20) for p in (0, 1)]
    got = await asyncio.to_thread(confluent_round_trip, broker.bootstrap(), "mixed", records)
    assert sorted(got) == sorted(records)


async def test_kafkas_controller_makes_our_broker_the_leader_clients_produce_to(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """The other direction, on the same wire: a Kafka 3.9 broker, elected controller by its own
    KafkaController, drives our broker through its control-plane listener (KIP-291)."""
    await beside_ours(kafka, zk, 0)
    ours = cluster.broker(1)
    await ours.wait_kind("registered", timeout=60)
    await create_topic(zk, "led-by-kafka", {0: (1,)})
    handled = await ours.wait_event(
        lambda e: e["kind"] == "become_leader" and e.get("topic") == "led-by-kafka",
        timeout=60,
        what="our broker leads led-by-kafka",
    )
    assert handled["leader_epoch"] == 0
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    bootstrap = "{}:{}".format(*ours.endpoint("PLAINTEXT"))
    got = await asyncio.to_thread(confluent_round_trip, bootstrap, "led-by-kafka", records)
    assert got == records


async def test_records_replicate_across_implementations_and_survive_a_leader_change(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Under Kafka's controller: a Kafka follower fetches from our leader; acks=all records, then our
    leader is killed and Kafka's controller moves leadership to the Kafka broker, which has them all."""
    kafka_broker = await beside_ours(kafka, zk, 0)
    ours = cluster.broker(1)
    await ours.wait_kind("registered", timeout=60)
    await create_topic(zk, "across", {0: (1, 0)})
    await ours.wait_event(
        lambda e: e["kind"] == "become_leader" and e.get("topic") == "across", timeout=60, what="our leader"
    )
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    bootstrap = "{}:{}".format(*ours.endpoint("PLAINTEXT"))
    assert await asyncio.to_thread(confluent_round_trip, bootstrap, "across", records) == records
    ours.kill()

    await wait_for_leader(zk, "across", 0, kafka_broker)
    got = await asyncio.to_thread(confluent_consume, kafka_broker.bootstrap(), "across", 1, len(records))
    assert [(0, key, value) for _, key, value in got[0]] == records


async def test_our_follower_of_a_kafka_leader_takes_over_with_every_acknowledged_record(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """The mirror image: our broker fetches from a Kafka leader (Kafka broker 0 is the controller and
    holds no replica); the leader is killed and our broker, in the ISR, is elected with every record."""
    controller = await beside_ours(kafka, zk, 0)
    leader = await beside_ours(kafka, zk, 2)
    ours = cluster.broker(1)
    await ours.wait_kind("registered", timeout=60)
    await create_topic(zk, "mirror", {0: (2, 1)})
    await ours.wait_event(
        lambda e: e["kind"] == "become_follower" and e.get("topic") == "mirror",
        timeout=60,
        what="our follower",
    )
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    assert await asyncio.to_thread(confluent_round_trip, leader.bootstrap(), "mirror", records) == records
    leader.kill()
    await wait_for_leader(zk, "mirror", 1, controller)
    bootstrap = "{}:{}".format(*ours.endpoint("PLAINTEXT"))
    got = await asyncio.to_thread(confluent_consume, bootstrap, "mirror", 1, len(records))
    assert [(0, key, value) for _, key, value in got[0]] == records
