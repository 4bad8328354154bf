"""Our brokers at IBP 3.9 in a cluster whose controller is Apache Kafka 3.9 at IBP 3.9 (issue 27).

Kafka's controller drives our brokers with LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4, on
our control-plane listener; our brokers find it among UpdateMetadata's live brokers and send it
AlterPartition v3 and ControlledShutdown v3. Replicas of one partition live on both implementations.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster.processes import BrokerProcess, Event
from kafkapeer.broker import KafkaBroker
from tests.interop.conftest import KafkaBrokers
from tests.support.clients import confluent_consume, confluent_round_trip
from tests.support.cluster import Cluster, epoch_of, produce
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.topic_writes import create_topic, delete_topic

IBP = "3.9"
START_TIMEOUT_S = 60.0
"""A Kafka broker's JVM start and registration (a cold JVM on a busy machine)."""
TIMEOUT_S = 30.0


async def registered(zk: AsyncZooKeeper, broker: KafkaBroker) -> dict[str, Any]:
    """Kafka's own ``/brokers/ids/N``, as JSON, once it appears."""
    path = f"{znodes.BROKER_IDS}/{broker.broker_id}"

    async def found() -> bytes | None:
        broker.check_running()
        if await zk.exists(path) is None:
            return None
        data, _ = await zk.get(path)
        return data

    data = await wait_until(found, f"{broker.name} registered", timeout=START_TIMEOUT_S, interval=0.2)
    decoded: dict[str, Any] = json.loads(data)
    return decoded


async def kafka_at_39(kafka: KafkaBrokers, zk: AsyncZooKeeper, broker_id: int) -> KafkaBroker:
    """A registered Kafka 3.9 broker at IBP 3.9 with our brokers' listener names (a CONTROLLER control
    plane beside PLAINTEXT); the first one started wins ``/controller``."""
    broker = kafka.like_ours(broker_id, IBP)
    await registered(zk, broker)
    return broker


async def ours_at_39(cluster: Cluster, broker_id: int, **overrides: Any) -> BrokerProcess:
    """One of our brokers at IBP 3.9, registered and known to Kafka's controller (its first
    UpdateMetadata v8 applied)."""
    broker = cluster.broker(
        broker_id,
        fixed_ports=True,
        **{"inter.broker.protocol.version": IBP, "replica.lag.time.max.ms": 2000, **overrides},
    )
    await broker.wait_event(
        lambda e: handled(e, "UpdateMetadata", 8),
        timeout=START_TIMEOUT_S,
        what="UpdateMetadata v8 from Kafka",
    )
    return broker


def handled(event: Event, api: str, version: int, error: str = "NONE") -> bool:
    return (
        event["kind"] == "control_request_handled"
        and event["api"] == api
        and event["api_version"] == version
        and event["error"] == error
    )


def took(event: Event, kind: str, topic: str, partition: int = 0) -> bool:
    return event["kind"] == kind and event.get("topic") == topic and event.get("partition") == partition


def bootstrap(broker: BrokerProcess) -> str:
    return "{}:{}".format(*broker.endpoint("PLAINTEXT"))


def segment_bytes(log_dir: Path, topic: str, partition: int) -> int:
    """The bytes of a partition's first segment on disk (both implementations name it alike)."""
    try:
        return (log_dir / f"{topic}-{partition}" / "00000000000000000000.log").stat().st_size
    except FileNotFoundError:
        return -1


def same_segment(leader_dir: Path, follower_dir: Path, topic: str, partition: int) -> Callable[[], bool]:
    """Whether the follower's copy of the partition holds the leader's bytes, all of them."""
    return lambda: (
        segment_bytes(follower_dir, topic, partition) == segment_bytes(leader_dir, topic, partition) > 0
    )


def kafka_log_dir(broker: KafkaBroker) -> Path:
    return broker.dir / "data"


def our_log_dir(broker: BrokerProcess) -> Path:
    """Our test brokers' ``log.dirs`` is their directory (``cluster.processes.BrokerProcess``)."""
    return broker.dir


async def test_kafkas_controller_makes_our_broker_leader_and_follower_and_records_flow_both_ways(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """LeaderAndIsr v7 makes our broker leader of one partition and follower of the other; acks=all
    records reach the other implementation's replica in each."""
    kafka_broker = await kafka_at_39(kafka, zk, 0)
    ours = await ours_at_39(cluster, 1)
    await create_topic(zk, "both", {0: (1, 0), 1: (0, 1)})
    led = await ours.wait_event(
        lambda e: took(e, "become_leader", "both", 0), timeout=TIMEOUT_S, what="leader"
    )
    await ours.wait_event(lambda e: took(e, "become_follower", "both", 1), timeout=TIMEOUT_S, what="follower")
    topic_id = await cluster.topic_id("both")
    assert led["topic_id"] == znodes.format_topic_id(topic_id)  # type: ignore[arg-type]
    lai = [e for e in ours.poll_events() if handled(e, "LeaderAndIsr", 7)]
    assert lai and all(e["partition_errors"] == 0 for e in lai)

    ours_records = [(0, f"k{i}".encode(), f"ours-{i}".encode()) for i in range(30)]
    kafka_records = [(1, f"k{i}".encode(), f"kafka-{i}".encode()) for i in range(30)]
    assert (
        await asyncio.to_thread(confluent_round_trip, bootstrap(ours), "both", ours_records) == ours_records
    )
    got = await asyncio.to_thread(confluent_round_trip, kafka_broker.bootstrap(), "both", kafka_records)
    assert got == kafka_records
    for partition, leader_dir, follower_dir in (
        (0, our_log_dir(ours), kafka_log_dir(kafka_broker)),
        (1, kafka_log_dir(kafka_broker), our_log_dir(ours)),
    ):
        await wait_until(
            same_segment(leader_dir, follower_dir, "both", partition),
            f"both-{partition} replicated byte for byte",
            timeout=TIMEOUT_S,
        )
    for partition in (0, 1):
        state, _ = await partition_state(zk, "both", partition)
        assert set(state.isr) == {0, 1}


async def test_our_registration_is_kafkas_json_and_compatible_with_its_finalized_features(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Key for key what a Kafka 3.9 broker writes in ``/brokers/ids/N`` (a rack included), with
    features a 3.9 controller finds compatible with ``/feature``: it takes our broker as live."""
    kafka_broker = await kafka_at_39(kafka, zk, 0)
    theirs = await registered(zk, kafka_broker)
    ours = await ours_at_39(cluster, 1, **{"broker.rack": "r1"})
    data, _ = await zk.get(f"{znodes.BROKER_IDS}/1")
    mine = json.loads(data)
    assert set(mine) == set(theirs) | {"rack"}
    assert (mine["version"], mine["features"], mine["rack"]) == (theirs["version"], theirs["features"], "r1")
    feature, _ = await zk.get("/feature")
    assert json.loads(feature)["features"] == {}, "nothing finalized that our empty features would lack"
    assert mine["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
    live = [e for e in ours.poll_events() if handled(e, "UpdateMetadata", 8)]
    assert live, "Kafka's controller took our broker as live and sent it UpdateMetadata v8"


async def test_a_request_for_our_previous_registration_is_refused_stale_broker_epoch(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Our broker is bounced faster than its ZooKeeper session: Kafka's controller still knows the old
    epoch and sends the new process an UpdateMetadata for it (on the same ports), which waits until the
    process has registered and is then refused; once Kafka's controller has seen the new
    registration, its requests carry the new epoch and are applied."""
    await kafka_at_39(kafka, zk, 0)
    ours = await ours_at_39(cluster, 1)
    old_epoch = epoch_of(ours)
    bounced = cluster.restart(1)
    await create_topic(zk, "poke", {0: (0,)})  # an UpdateMetadata to every live broker, ours included
    refused = await bounced.wait_event(
        lambda e: handled(e, "UpdateMetadata", 8, "STALE_BROKER_EPOCH"),
        timeout=TIMEOUT_S,
        what="the stale UpdateMetadata refused",
    )
    new_epoch = epoch_of(bounced)
    assert refused["broker_epoch"] == old_epoch < new_epoch == refused["broker_epoch_now"]
    applied = await bounced.wait_event(
        lambda e: handled(e, "UpdateMetadata", 8) and e["broker_epoch"] == new_epoch,
        timeout=TIMEOUT_S,
        what="an UpdateMetadata for the new registration applied",
    )
    assert applied["broker_epoch_now"] == new_epoch


async def isr(zk: AsyncZooKeeper, topic: str) -> set[int]:
    state, _ = await partition_state(zk, topic, 0)
    return set(state.isr)


def committed(event: Event, new_isr: set[int]) -> bool:
    return event["kind"] == "isr_changed" and event["error"] == "NONE" and set(event["isr"]) == new_isr


async def test_our_leaders_isr_changes_reach_kafkas_controller_through_alter_partition_v3(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Our leader (1) drops our killed follower (2) from the ISR and takes it back once it has caught
    up: each change is its AlterPartition v3, committed by Kafka's controller into ZooKeeper (well
    before the controller could notice the death itself: the follower's session outlives the leader's
    ``replica.lag.time.max.ms`` fivefold)."""
    kafka_broker = await kafka_at_39(kafka, zk, 0)
    leader = await ours_at_39(cluster, 1)
    follower = await ours_at_39(cluster, 2, **{"zookeeper.session.timeout.ms": 10000})
    await create_topic(zk, "isr", {0: (1, 2, 0)})
    await leader.wait_event(lambda e: took(e, "become_leader", "isr"), timeout=TIMEOUT_S, what="our leader")
    await follower.wait_event(lambda e: took(e, "become_follower", "isr"), timeout=TIMEOUT_S, what="follower")
    follower.kill()
    assert (await produce(leader, "isr", 0, 10, acks=1))["error_code"] == 0  # the follower falls behind
    shrunk = await leader.wait_event(lambda e: committed(e, {0, 1}), timeout=TIMEOUT_S, what="ISR shrunk")
    assert await isr(zk, "isr") == {0, 1}
    assert shrunk["partition_epoch"] > 0
    cluster.restart(2)
    await leader.wait_event(lambda e: committed(e, {0, 1, 2}), timeout=TIMEOUT_S, what="ISR expanded")
    assert await isr(zk, "isr") == {0, 1, 2}
    await wait_until(  # what Kafka's controller logs for each AlterPartition it commits
        lambda: len(kafka_broker.log_lines("ISR for partition isr-0 updated to")) == 2,
        "both changes committed through AlterPartition by Kafka's controller",
        timeout=TIMEOUT_S,
    )


async def test_our_controlled_shutdown_moves_leadership_to_kafka_first(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """SIGTERM: our broker asks Kafka's controller (ControlledShutdown v3, its epoch) to move its
    leadership away, and stops only once nothing is left; the Kafka replica then serves every
    acknowledged record."""
    kafka_broker = await kafka_at_39(kafka, zk, 0)
    ours = await ours_at_39(cluster, 1)
    await create_topic(zk, "moving", {0: (1, 0)})
    await ours.wait_event(lambda e: took(e, "become_leader", "moving"), timeout=TIMEOUT_S, what="our leader")
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    assert await asyncio.to_thread(confluent_round_trip, bootstrap(ours), "moving", records) == records
    epoch = epoch_of(ours)
    assert await asyncio.to_thread(ours.stop, TIMEOUT_S) == 0
    attempts = [e for e in ours.poll_events() if e["kind"] == "controlled_shutdown_attempt"]
    assert [(a["api_version"], a["broker_epoch"], a["controller_id"]) for a in attempts] == [(3, epoch, 0)]
    assert (attempts[0]["error"], attempts[0]["remaining"]) == ("NONE", [])
    state, _ = await partition_state(zk, "moving", 0)
    assert (state.leader, state.isr) == (0, (0,))
    got = await asyncio.to_thread(confluent_consume, kafka_broker.bootstrap(), "moving", 1, len(records))
    assert [(0, key, value) for _, key, value in got[0]] == records


async def test_kafkas_topic_deletion_removes_our_replica_through_stop_replica_v4(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """Kafka's controller deletes a topic with StopReplica v4 (delete, leader epoch -2) and completes the
    deletion only once every replica has answered it without error: ours included."""
    await kafka_at_39(kafka, zk, 0)
    ours = await ours_at_39(cluster, 1)
    await create_topic(zk, "doomed", {0: (1, 0), 1: (0, 1)})
    for partition in (0, 1):
        await ours.wait_event(
            lambda e, p=partition: (
                took(e, "become_leader", "doomed", p) or took(e, "become_follower", "doomed", p)
            ),
            timeout=TIMEOUT_S,
            what=f"doomed-{partition} hosted",
        )
    await delete_topic(zk, "doomed")

    async def gone() -> bool:
        return await zk.exists(znodes.topic_path("doomed")) is None

    await wait_until(gone, "Kafka's controller completed the deletion", timeout=TIMEOUT_S)
    stopped = [e for e in ours.poll_events() if e["kind"] == "stop_replica" and e["topic"] == "doomed"]
    assert {(e["partition"], e["delete"], e["leader_epoch"]) for e in stopped if e["delete"]} == {
        (0, True, -2),
        (1, True, -2),
    }
    handled = [e for e in ours.poll_events() if handled_stop_replica(e)]
    assert handled and all(e["partition_errors"] == 0 for e in handled)
    assert not (our_log_dir(ours) / "doomed-0").exists() and not (our_log_dir(ours) / "doomed-1").exists()


def handled_stop_replica(event: Event) -> bool:
    return (
        event["kind"] == "control_request_handled"
        and event["api"] == "StopReplica"
        and event["api_version"] == 4
    )


async def test_kafkas_controller_keeps_our_shutting_down_broker_out_of_the_isr(
    kafka: KafkaBrokers, cluster: Cluster, zk: AsyncZooKeeper
) -> None:
    """KIP-841 with Kafka's controller as the judge: once our broker has asked to shut down (a
    ControlledShutdown v3 sent for it by hand, so that the process stays up), Kafka's controller takes
    it out of the ISR and stops its replica, and records produced meanwhile never bring it back."""
    from network.connection import KafkaConnection
    from protocol import ApiKey

    controller = await kafka_at_39(kafka, zk, 0)
    leader = await kafka_at_39(kafka, zk, 2)
    ours = await ours_at_39(cluster, 1)
    await create_topic(zk, "kip841", {0: (2, 1)})
    await ours.wait_event(lambda e: took(e, "become_follower", "kip841"), timeout=TIMEOUT_S, what="follower")

    async def isr() -> list[int]:
        return list((await partition_state(zk, "kip841", 0))[0].isr)

    await wait_until(lambda: isr_is(isr, [2, 1]), "our follower in the ISR", timeout=TIMEOUT_S)
    connection = await KafkaConnection.open(*controller.endpoint("PLAINTEXT"), client_id="kip841")
    try:
        body = {"broker_id": 1, "broker_epoch": epoch_of(ours)}
        _, answer = await connection.send(ApiKey.CONTROLLED_SHUTDOWN, 3, body, timeout=TIMEOUT_S)
    finally:
        await connection.close()
    assert answer["error_code"] == 0
    await wait_until(lambda: isr_is(isr, [2]), "our broker out of the ISR", timeout=TIMEOUT_S)
    await ours.wait_event(
        lambda e: took(e, "stop_replica", "kip841"), timeout=TIMEOUT_S, what="replica stopped"
    )
    records = [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    assert await asyncio.to_thread(confluent_round_trip, leader.bootstrap(), "kip841", records) == records
    # Kafka's ZooKeeper controller keeps it out by stopping its replica (StopReplica, delete=false),
    # so no leader sees it caught up; acks=all records were acknowledged by the ISR of one.
    stopped = [e for e in ours.poll_events() if took(e, "stop_replica", "kip841")]
    assert stopped and stopped[0]["delete"] is False
    assert await isr() == [2]


async def isr_is(read: Callable[[], Any], expected: list[int]) -> bool:
    return bool(await read() == expected)
