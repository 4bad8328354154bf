"""Seed 000's scenarios (KIP-380) with a real ZooKeeper, a controller process and broker processes.

Requests "from a previous broker generation" are made real, not simulated: a broker is frozen
(SIGSTOP) so the controller's requests wait in its socket, then killed and restarted on the same
ports. The controller's channel resends the very same request to the new process, which must judge
it by the epoch it carries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.checkpoint import read_offsets
from cluster import metrics_reference
from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, channel_idle, epoch_of, produce
from tests.support.metrics import parse, scrape_text_async
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore import znodes

pytestmark = [pytest.mark.zookeeper, pytest.mark.secure_variant]


async def test_stop_replica_from_before_a_bounce_is_ignored_and_the_replica_stays_online(
    cluster: Cluster,
) -> None:
    """Seed 000 (1): the StopReplica a controlled shutdown produced reaches the broker after its restart."""
    await cluster.start((1, 2, 3))
    await cluster.topic("orders", {0: (1, 3), 1: (2, 3)})
    old = cluster.brokers[3]
    old_epoch = epoch_of(old)
    # What the controller stamps on its requests in this generation: its epoch and the largest broker epoch.
    controller_epoch = (await cluster.controller.wait_kind("controller_elected"))["controller_epoch"]
    max_epoch = max(epoch_of(b) for b in cluster.brokers.values())
    # Controlled shutdown: the controller sends broker 3 a StopReplica for both partitions.
    assert old.stop() == 0
    attempts = [e for e in old.poll_events() if e["kind"] == "controlled_shutdown_attempt"]
    assert attempts and attempts[-1]["error"] == "NONE" and attempts[-1]["remaining"] == []
    assert [e["kind"] for e in old.poll_events()][-1] == "shutdown_complete"
    new = cluster.restart(3)
    new_epoch = (await new.wait_kind("registered"))["broker_epoch"]
    for partition in (0, 1):
        await new.wait_event(
            lambda e, p=partition: (
                e["kind"] == "become_follower" and e["topic"] == "orders" and e["partition"] == p
            ),
            what=f"orders-{partition} online on the restarted broker",
        )

    # That StopReplica, delayed past the restart (as a resend after reconnecting would deliver it):
    late = {
        "controller_id": cluster.controller.controller_id,
        "controller_epoch": controller_epoch,
        "max_broker_epoch": max_epoch,
        "delete_partitions": False,
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
    }
    assert max_epoch < new_epoch and old_epoch < new_epoch
    reply = await new.request("CONTROLLER", ApiKey.STOP_REPLICA, 4, late)
    assert reply == {"error_code": ErrorCode.STALE_BROKER_EPOCH, "partition_errors": []}
    assert not [e for e in new.poll_events() if e["kind"] == "stop_replica"]
    handled = await new.wait_event(
        lambda e: e["kind"] == "control_request_handled" and e["api"] == "StopReplica", what="the rejection"
    )
    assert handled["error"] == "STALE_BROKER_EPOCH" and handled["broker_epoch_now"] == new_epoch


async def all_isrs_full(cluster: Cluster, topic: str, partitions: tuple[int, ...]) -> bool:
    for p in partitions:
        state, _ = await partition_state(cluster.admin, topic, p)
        if len(state.isr) < 3:
            return False
    return True


async def test_controlled_shutdown_from_a_previous_generation_moves_nothing(cluster: Cluster) -> None:
    """Seed 000 (2): the controller rejects a ControlledShutdown carrying the broker's old epoch."""
    await cluster.start((1, 2, 3), {2: {"controlled_shutdown_enable": "false"}})
    await cluster.topic("audit", {0: (2, 1, 3), 1: (1, 2, 3)})
    old_epoch = epoch_of(cluster.brokers[2])
    cluster.brokers[2].stop()
    new = cluster.restart(2)
    new_epoch = (await new.wait_kind("registered"))["broker_epoch"]
    assert new_epoch > old_epoch
    await cluster.controller.wait_event(
        lambda e: e["kind"] == "broker_change" and 2 in e["new"] + e["bounced"], what="broker 2 back"
    )
    # Broker 2 rejoins both ISRs (its leaders propose it once it has caught up); then nothing moves.
    await wait_until(lambda: all_isrs_full(cluster, "audit", (0, 1)), what="broker 2 back in every ISR")
    before = {p: await partition_state(cluster.admin, "audit", p) for p in (0, 1)}

    reply = await cluster.controller.rpc(
        ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 2, "broker_epoch": old_epoch}
    )
    assert reply["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert {p: await partition_state(cluster.admin, "audit", p) for p in (0, 1)} == before
    assert not [e for e in cluster.controller.poll_events() if e["kind"] == "controlled_shutdown_started"]


async def test_leader_and_isr_from_before_a_restart_is_rejected_and_the_checkpoint_untouched(
    cluster: Cluster,
) -> None:
    """Seed 000 (3), KAFKA-7235: a stale first LeaderAndIsr must not let the broker rewrite its checkpoint."""
    await cluster.start((1, 2))
    cluster.broker(3, fixed_ports=True, replica_high_watermark_checkpoint_interval_ms=100)
    await cluster.brokers[3].wait_kind("broker_started")
    await cluster.topic("ledger", {0: (1, 3), 1: (3, 2)})
    old = cluster.brokers[3]
    old_epoch = epoch_of(old)
    checkpoint = old.dir / "replication-offset-checkpoint"
    assert (await produce(cluster.brokers[1], "ledger", 0, 42))["error_code"] == ErrorCode.NONE
    assert (await produce(old, "ledger", 1, 7))["error_code"] == ErrorCode.NONE
    high_watermarks = {znodes.TopicPartition("ledger", 0): 42, znodes.TopicPartition("ledger", 1): 7}
    await old.wait_event(
        lambda e: e["kind"] == "checkpoint_written" and read_offsets(checkpoint) == high_watermarks,
        what="broker 3 records both high watermarks",
    )
    await channel_idle(cluster.controller, 3)  # so the next request to broker 3 is the LeaderAndIsr below

    old.pause()
    # Broker 1 leaves leadership of ledger-0: the controller sends broker 3 a LeaderAndIsr it cannot read yet.
    reply = await cluster.controller.rpc(
        ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 1, "broker_epoch": epoch_of(cluster.brokers[1])}
    )
    assert reply["error_code"] == ErrorCode.NONE
    old.kill()
    written = checkpoint.read_bytes()  # what the broker had durably recorded
    new = cluster.restart(3)

    stale = await new.wait_event(
        lambda e: e["kind"] == "control_request_handled" and e["api"] == "LeaderAndIsr",
        timeout=30,
        what="the first LeaderAndIsr the restarted broker handles",
    )
    assert stale["error"] == "STALE_BROKER_EPOCH" and stale["max_broker_epoch"] < epoch_of(new)
    assert epoch_of(new) > old_epoch
    assert checkpoint.read_bytes() == written
    assert not [e for e in new.poll_events() if e["kind"] == "checkpoint_written"]

    # The next, current LeaderAndIsr starts checkpointing again, keeping the recorded high watermarks.
    await new.wait_kind("checkpoint_written", timeout=30)
    assert read_offsets(checkpoint) == high_watermarks


async def test_a_fast_bounce_is_detected_and_the_broker_serves_without_a_session_timeout(
    cluster: Cluster,
) -> None:
    """Seed 000 (4): the controller tells a bounce from the czxid alone and re-initialises the broker."""
    await cluster.start((1, 2, 3), {3: {"controlled_shutdown_enable": "false"}})
    await cluster.topic("payments", {0: (3, 1, 2)})
    old_epoch = epoch_of(cluster.brokers[3])
    controller = cluster.controller
    controller.pause()  # it sees neither the exit nor the new registration until both happened
    try:
        assert cluster.brokers[3].stop() == 0  # closes the session: the registration goes at once
        new = cluster.restart(3)
        new_epoch = (await new.wait_kind("registered", timeout=20))["broker_epoch"]
    finally:
        controller.resume()
    change = await controller.wait_kind("broker_change", timeout=20)
    assert change["bounced"] == [3] and change["dead"] == [] and change["new"] == []
    assert change["epochs"]["3"] == new_epoch and change["previous_epochs"]["3"] == old_epoch
    follower = await new.wait_event(
        lambda e: e["kind"] == "become_follower" and e["topic"] == "payments", timeout=20, what="payments-0"
    )
    assert follower["leader"] in (1, 2)
    handled = [e for e in new.poll_events() if e["kind"] == "control_request_handled"]
    assert handled and all(e["error"] == "NONE" for e in handled)
    assert all(e["max_broker_epoch"] >= new_epoch for e in handled)


async def test_requests_from_a_deposed_controller_epoch_change_nothing(cluster: Cluster) -> None:
    await cluster.start((1, 2))
    await cluster.topic("steady", {0: (1, 2)})
    epoch = (await cluster.controller.wait_kind("controller_elected"))["controller_epoch"]
    broker = cluster.brokers[2]
    stale = {
        "controller_id": 7,
        "controller_epoch": epoch - 1,
        "max_broker_epoch": 1 << 40,
        "topic_states": [
            {
                "topic_name": "steady",
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": epoch - 1,
                        "leader": 2,
                        "leader_epoch": 99,
                        "isr": [2],
                        "partition_epoch": 9,
                        "replicas": [1, 2],
                        "is_new": False,
                    }
                ],
            }
        ],
        "live_leaders": [],
    }
    reply = await broker.request("CONTROLLER", ApiKey.LEADER_AND_ISR, 5, stale)
    assert reply["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert [p["error_code"] for p in reply["partition_errors"]] == [ErrorCode.STALE_CONTROLLER_EPOCH]
    assert not [e for e in broker.poll_events() if e["kind"] == "become_leader" and e["topic"] == "steady"]
    state, _ = await partition_state(cluster.admin, "steady", 0)
    assert state.leader == 1


def kafka_python_leader(config: dict[str, Any], topic: str, partition: int) -> tuple[int | None, list[int]]:
    """The leader a fresh kafka-python client learns from Metadata, and the broker ids it sees."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(**config, request_timeout_ms=10000)
    try:
        if consumer.partitions_for_topic(topic) is None:
            return None, []
        cluster = consumer._client.cluster
        leader = cluster.leader_for_partition(TopicPartition(topic, partition))
        return leader, sorted(b.node_id for b in cluster.brokers())
    finally:
        consumer.close()


async def test_kafka_python_sees_the_new_leader_after_a_leader_change(cluster: Cluster) -> None:
    await cluster.start((1, 2, 3))
    await cluster.topic("clients", {0: (1, 2, 3)})
    host, port = cluster.brokers[3].endpoint(cluster.client_listener)
    config = {**cluster.kafka_python_config(), "bootstrap_servers": f"{host}:{port}"}
    loop = asyncio.get_running_loop()
    leader, brokers = await loop.run_in_executor(None, kafka_python_leader, config, "clients", 0)
    assert (leader, brokers) == (1, [1, 2, 3])

    reply = await cluster.controller.rpc(
        ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 1, "broker_epoch": epoch_of(cluster.brokers[1])}
    )
    assert reply["error_code"] == ErrorCode.NONE
    await cluster.brokers[3].wait_event(
        lambda e: e["kind"] == "become_follower" and e["topic"] == "clients" and e["leader"] == 2,
        what="broker 3 follows the new leader",
    )
    await cluster.brokers[3].wait_event(
        lambda e: (
            e["kind"] == "control_request_handled" and e["api"] == "UpdateMetadata" and e["error"] == "NONE"
        ),
        what="the UpdateMetadata that follows",
    )
    leader, _ = await loop.run_in_executor(None, kafka_python_leader, config, "clients", 0)
    assert leader == 2


async def test_a_cold_broker_lists_itself_and_answers_leader_not_available(cluster: Cluster) -> None:
    broker = cluster.broker(1)  # no controller: no UpdateMetadata will come
    await broker.wait_kind("broker_started")
    reply = await broker.request(
        broker.client_listener, ApiKey.METADATA, 1, {"topics": [{"name": "anything"}]}
    )
    host, port = broker.endpoint(broker.client_listener)
    assert reply["brokers"] == [{"node_id": 1, "host": host, "port": port, "rack": None}]
    assert [(t["name"], t["error_code"]) for t in reply["topics"]] == [
        ("anything", ErrorCode.LEADER_NOT_AVAILABLE)
    ]
    versions = await broker.request(broker.client_listener, ApiKey.API_VERSIONS, 2, {})
    served = {entry["api_key"] for entry in versions["api_keys"]}
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.LEADER_AND_ISR} <= served
    assert ApiKey.ALTER_PARTITION not in served and ApiKey.CONTROLLED_SHUTDOWN not in served
    refused = await broker.request("CONTROLLER", ApiKey.METADATA, 1, {"topics": None})
    assert [t["error_code"] for t in refused["topics"]] == [] and refused["brokers"] == []


async def test_a_paused_old_controller_cannot_change_broker_state(cluster: Cluster) -> None:
    await cluster.start((1, 2))
    old = cluster.controller
    epoch = (await old.wait_kind("controller_elected"))["controller_epoch"]
    successor = cluster.start_controller(1002)
    await successor.wait_kind("controller_started")
    await cluster.topic("guarded", {0: (1, 2)})

    old.pause()  # its session (6 s) expires while it is frozen
    try:
        await successor.wait_kind("controller_elected", timeout=30, controller_epoch=epoch + 1)
        await cluster.topic("later", {0: (2, 1)})
    finally:
        old.resume()
    await old.wait_kind("controller_resigned", timeout=30)
    for broker in cluster.brokers.values():
        handled = [e for e in broker.poll_events() if e["kind"] == "control_request_handled"]
        takeover = next(i for i, e in enumerate(handled) if e["controller_epoch"] == epoch + 1)
        late = [e for e in handled[takeover:] if e["controller_epoch"] == epoch]
        assert all(e["error"] == "STALE_CONTROLLER_EPOCH" for e in late)
    state, _ = await partition_state(cluster.admin, "later", 0)
    assert state.controller_epoch == epoch + 1 and state.leader == 2


async def test_metrics_use_the_jmx_exporter_names(cluster: Cluster) -> None:
    await cluster.start((1, 2), {1: {"metrics_port": 0}})
    await cluster.topic("metered", {0: (1, 2), 1: (2, 1)})
    broker = cluster.brokers[1]
    port = (await broker.wait_kind("broker_started"))["metrics_port"]
    answer = await produce(broker, "metered", 0, 10, acks=1)
    assert answer["error_code"] == ErrorCode.NONE
    text = await scrape_text_async(port)
    samples = parse(text)
    assert samples["kafka_server_replicamanager_leadercount"] == 1
    assert samples["kafka_server_replicamanager_partitioncount"] == 2
    assert samples["kafka_server_kafkaserver_brokerepoch"] == epoch_of(broker)
    assert samples["kafka_network_requestchannel_controlplanerequestqueuesize"] == 0
    assert "kafka_network_requestchannel_requestqueuesize" in samples
    assert 0 <= samples["kafka_server_kafkarequesthandlerpool_controlplanerequesthandleravgidlepercent"] <= 1
    assert 0 <= samples["kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"] <= 1
    assert (
        samples['kafka_network_requestmetrics_requestspersec_total{request="LeaderAndIsr",version="5"}'] >= 1
    )
    assert samples['kafka_network_requestmetrics_requests_total{request="LeaderAndIsr",version="5"}'] >= 1
    assert samples['kafka_network_requestmetrics_totaltimems_count{request="UpdateMetadata"}'] >= 1
    assert samples['kafka_network_requestmetrics_totaltimems{quantile="0.99",request="UpdateMetadata"}'] >= 0
    assert samples['kafka_network_requestmetrics_totaltimems_histogram_count{request="UpdateMetadata"}'] >= 1
    assert samples['kafka_network_requestmetrics_errors_total{error="NONE",request="Produce"}'] == 1
    assert samples["kafka_server_brokertopicmetrics_messagesinpersec_total"] == 10
    assert samples["kafka_server_brokertopicmetrics_messagesin_total"] == 10
    assert samples['kafka_server_brokertopicmetrics_messagesin_total{topic="metered"}'] == 10
    assert samples["kafka_server_brokertopicmetrics_bytesinpersec_total"] > 10 * 2
    assert samples['kafka_server_brokertopicmetrics_totalproducerequests_total{topic="metered"}'] == 1
    assert samples["kafka_server_replicamanager_underminisrpartitioncount"] == 0
    assert samples["kafka_server_replicamanager_atminisrpartitioncount"] == 0
    assert samples['kafka_cluster_partition_replicascount{partition="0",topic="metered"}'] == 2
    assert samples['kafka_cluster_partition_replicascount{partition="1",topic="metered"}'] == 0  # a follower
    assert samples['kafka_log_log_size{partition="0",topic="metered"}'] > 10 * 2
    waiting = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
    assert samples[waiting + '{delayedOperation="Produce"}'] == 0
    assert "kafka_server_replicamanager_isrshrinkspersec_total" in samples
    assert "kafka_server_replicamanager_isrshrinks_total" in samples
    assert samples["kafka_server_sessionexpirelistener_zookeepersyncconnects_total"] == 1
    assert samples['kafka_server_sessionexpirelistener_sessionstate{state="CONNECTED"}'] == 1
    assert samples["kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"] > 0
    assert samples["process_open_fds"] > 0 and 'python_gc_objects_collected_total{generation="0"}' in samples
    # docs/metrics.md lists exactly what a broker exports.
    page = metrics_reference.PAGE.read_text(encoding="utf-8")
    assert metrics_reference.exposed_names(text) == metrics_reference.documented_names(page, "broker")
