"""The controller daemon as a real process against a real ZooKeeper, driving scripted brokers.

The brokers are ``tests.support.broker_sim.SimulatedBroker``s: real TCP control listeners speaking the
wire protocol, registered with ``register_broker``, validating epochs as a Kafka broker does.
"""

from __future__ import annotations

import pytest

from cluster import metrics_reference
from protocol import ApiKey, ErrorCode
from tests.support.cluster import Cluster, from_epoch
from tests.support.metrics import scrape_async, scrape_text_async
from tests.support.requests import alter_partition_request
from tests.support.waiting import wait_until
from tests.support.zookeeper import partition_state
from zkstore import znodes
from zkstore.topic_writes import create_topic

pytestmark = [pytest.mark.zookeeper, pytest.mark.secure_variant]

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA


async def test_failover_bumps_the_epoch_and_sends_update_metadata_before_leader_and_isr(
    cluster: Cluster,
) -> None:
    await cluster.start_simulated(1, 2, 3)
    first = cluster.start_controller(1001)
    epoch = (await first.wait_kind("controller_elected"))["controller_epoch"]
    await create_topic(cluster.admin, "orders", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    for broker in cluster.simulated.values():
        await broker.wait_for(from_epoch(LAI, epoch))
    standby = cluster.start_controller(1002)
    await standby.wait_kind("controller_started")
    seen = {b: len(broker.received) for b, broker in cluster.simulated.items()}

    assert first.stop() == 0
    assert any(e["reason"] == "shutting down" for e in first.of_kind("controller_resigned"))
    elected = await standby.wait_kind("controller_elected")
    assert elected["controller_epoch"] == epoch + 1

    for broker_id, broker in cluster.simulated.items():
        lai = await broker.wait_for(from_epoch(LAI, epoch + 1))
        assert lai.error == ErrorCode.NONE
        assert {s["partition_index"] for t in lai.body["topic_states"] for s in t["partition_states"]} == {
            0,
            1,
            2,
        }
        assert all(
            s["leader"] == (1, 2, 3)[s["partition_index"]]
            for t in lai.body["topic_states"]
            for s in t["partition_states"]
        )
        after = [r for r in broker.received[seen[broker_id] :] if r.body["controller_epoch"] == epoch + 1]
        first_request = after[0]
        assert first_request.api_key == UM, f"broker {broker_id} got {first_request.describe()} first"
        assert first_request.body["topic_states"] == []
        assert sorted(b["id"] for b in first_request.body["live_brokers"]) == [1, 2, 3]
        assert broker.metadata()["controller_epoch"] == epoch + 1
    data, _ = await cluster.admin.get(znodes.CONTROLLER)
    registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
    assert registration is not None and registration.broker_id == 1002


async def test_fast_bounce_is_detected_and_the_next_requests_carry_the_new_epoch(cluster: Cluster) -> None:
    await cluster.start_simulated(1, 2, 3)
    controller = cluster.start_controller(1001, inter_broker_protocol_version="2.2")  # per-broker epochs
    epoch = (await controller.wait_kind("controller_elected"))["controller_epoch"]
    await create_topic(cluster.admin, "payments", {0: (1, 2, 3), 1: (2, 3, 1)})
    bouncing = cluster.simulated[1]
    await bouncing.wait_for(from_epoch(LAI, epoch))
    old_epoch = bouncing.epoch

    # Re-register while the controller cannot look: it must tell the bounce from the czxid alone.
    controller.pause()
    try:
        new_epoch = await bouncing.bounce()
    finally:
        controller.resume()
    assert new_epoch > old_epoch

    change = await controller.wait_kind("broker_change", timeout=20)
    assert change["bounced"] == [1] and change["new"] == [] and change["dead"] == []
    assert change["previous_epochs"]["1"] == old_epoch and change["epochs"]["1"] == new_epoch
    lai = await bouncing.wait_for(lambda r: r.api_key == LAI and r.body["broker_epoch"] == new_epoch)
    assert lai.error == ErrorCode.NONE and lai.api_version == 2
    um = await bouncing.wait_for(lambda r: r.api_key == UM and r.body["broker_epoch"] == new_epoch)
    assert um.error == ErrorCode.NONE and um.api_version == 5
    stale = [r for r in bouncing.received if r.error == ErrorCode.STALE_BROKER_EPOCH]
    assert all(r.body["broker_epoch"] == old_epoch for r in stale)


async def test_controlled_shutdown_is_fenced_by_the_broker_epoch(cluster: Cluster) -> None:
    await cluster.start_simulated(1, 2, 3)
    controller = cluster.start_controller(1001)
    epoch = (await controller.wait_kind("controller_elected"))["controller_epoch"]
    await create_topic(cluster.admin, "audit", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    for broker in cluster.simulated.values():
        await broker.wait_for(from_epoch(LAI, epoch))

    controller.pause()
    try:
        old_epoch, new_epoch = cluster.simulated[3].epoch, await cluster.simulated[3].bounce()
    finally:
        controller.resume()
    await controller.wait_kind("broker_change", bounced=[3])
    before = {p: await partition_state(cluster.admin, "audit", p) for p in range(3)}

    stale = await controller.rpc(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 3, "broker_epoch": old_epoch})
    assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert {p: await partition_state(cluster.admin, "audit", p) for p in range(3)} == before
    rejected = await controller.wait_kind("rpc_rejected", api="ControlledShutdown")
    assert rejected["broker_epoch"] == old_epoch and rejected["cached_epoch"] == new_epoch

    unknown = await controller.rpc(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 99, "broker_epoch": 5})
    assert unknown["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE

    # Broker 2 leads partition 1: a current epoch moves that leadership and answers with nothing left.
    leaving = cluster.simulated[2]
    ok = await controller.rpc(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 2, "broker_epoch": leaving.epoch})
    assert ok == {"error_code": ErrorCode.NONE, "remaining_partitions": []}
    state, _ = await partition_state(cluster.admin, "audit", 1)
    assert state.leader != 2 and 2 not in state.isr
    assert state.leader_epoch == before[1][0].leader_epoch + 1
    for p in (0, 2):
        state, _ = await partition_state(cluster.admin, "audit", p)
        assert 2 not in state.isr
    stop = await leaving.wait_for(lambda r: r.api_key == SR and not r.body["delete_partitions"])
    assert stop.error == ErrorCode.NONE


async def test_alter_partition_naming_a_shutting_down_broker_is_ineligible(cluster: Cluster) -> None:
    await cluster.start_simulated(1, 2, 3)
    controller = cluster.start_controller(1001)
    epoch = (await controller.wait_kind("controller_elected"))["controller_epoch"]
    await create_topic(cluster.admin, "ledger", {0: (1, 2, 3)})
    await cluster.simulated[1].wait_for(from_epoch(LAI, epoch))
    shutdown = await controller.rpc(
        ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 3, "broker_epoch": cluster.simulated[3].epoch}
    )
    assert shutdown["error_code"] == ErrorCode.NONE
    state, version = await partition_state(cluster.admin, "ledger", 0)
    assert state.isr == (1, 2)
    topic_id = await cluster.topic_id("ledger")

    def request(new_isr: list[int], key: object, ver: int) -> dict[str, object]:
        return alter_partition_request(1, cluster.simulated[1].epoch, key, state, version, new_isr, ver)

    v2 = await controller.rpc(ApiKey.ALTER_PARTITION, 2, request([1, 2, 3], topic_id, 2))
    assert v2["error_code"] == ErrorCode.NONE
    assert v2["topics"][0]["partitions"][0]["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    v1 = await controller.rpc(ApiKey.ALTER_PARTITION, 1, request([1, 2, 3], "ledger", 1))
    assert v1["topics"][0]["partitions"][0]["error_code"] == ErrorCode.OPERATION_NOT_ATTEMPTED
    assert await partition_state(cluster.admin, "ledger", 0) == (state, version)
    rejected = await controller.wait_kind("rpc_rejected", api="AlterPartition", error="INELIGIBLE_REPLICA")
    assert rejected["shutting_down"] == [3]

    stale = request([1], topic_id, 2) | {"broker_epoch": cluster.simulated[1].epoch - 1}
    assert (await controller.rpc(ApiKey.ALTER_PARTITION, 2, stale))[
        "error_code"
    ] == ErrorCode.STALE_BROKER_EPOCH

    shrink = await controller.rpc(ApiKey.ALTER_PARTITION, 2, request([1], topic_id, 2))
    answer = shrink["topics"][0]["partitions"][0]
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["isr"] == [1] and answer["leader_id"] == 1 and answer["partition_epoch"] == version + 1
    new_state, new_version = await partition_state(cluster.admin, "ledger", 0)
    assert (
        new_state.isr == (1,) and new_version == version + 1 and new_state.leader_epoch == state.leader_epoch
    )
    um = await cluster.simulated[2].wait_for(
        lambda r: (
            r.api_key == UM
            and any(s["isr"] == [1] for t in r.body["topic_states"] for s in t["partition_states"])
        )
    )
    assert um.error == ErrorCode.NONE


async def test_a_zombie_controller_cannot_write_after_its_session_expired(cluster: Cluster) -> None:
    await cluster.start_simulated(1, 2, 3)
    zombie = cluster.start_controller(1001, zookeeper_session_timeout_ms=4000)
    epoch = (await zombie.wait_kind("controller_elected"))["controller_epoch"]
    await create_topic(cluster.admin, "before", {0: (1, 2, 3)})
    await cluster.simulated[1].wait_for(from_epoch(LAI, epoch))
    successor = cluster.start_controller(1002)
    await successor.wait_kind("controller_started")

    zombie.pause()  # a long GC pause: the session expires while the process cannot notice
    try:
        elected = await successor.wait_kind("controller_elected", timeout=30)
        assert elected["controller_epoch"] == epoch + 1
        await create_topic(cluster.admin, "after", {0: (2, 3, 1)})
        await cluster.simulated[2].wait_for(from_epoch(LAI, epoch + 1))
        changes_before_resume = len(zombie.of_kind("leader_and_isr_change"))
    finally:
        zombie.resume()

    resigned = await zombie.wait_kind("controller_resigned", timeout=30)
    assert resigned["controller_epoch"] == epoch
    assert len(zombie.of_kind("leader_and_isr_change")) == changes_before_resume
    assert not zombie.of_kind("controller_elected")[1:], "the zombie must not win again while 1002 is active"
    state, _ = await partition_state(cluster.admin, "after", 0)
    assert state.controller_epoch == epoch + 1
    data, _ = await cluster.admin.get(znodes.CONTROLLER)
    registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
    assert registration is not None and registration.broker_id == 1002
    for broker in cluster.simulated.values():
        takeover = min(r.at for r in broker.received if r.body["controller_epoch"] == epoch + 1)
        late = [r for r in broker.received if r.body["controller_epoch"] == epoch and r.at > takeover]
        assert all(r.error == ErrorCode.STALE_CONTROLLER_EPOCH for r in late)


async def test_metrics_use_the_jmx_exporter_names_and_follow_the_cluster(cluster: Cluster) -> None:
    await cluster.start_simulated(1, 2)
    active = cluster.start_controller(1001, metrics_port=0)
    epoch = (await active.wait_kind("controller_elected"))["controller_epoch"]
    standby = cluster.start_controller(1002, metrics_port=0)
    await create_topic(cluster.admin, "metered", {0: (1, 2), 1: (2, 1)})
    await cluster.simulated[1].wait_for(from_epoch(LAI, epoch))
    active_port = (await active.wait_kind("controller_started"))["metrics_port"]
    standby_port = (await standby.wait_kind("controller_started"))["metrics_port"]

    async def settled() -> dict[str, float] | None:
        samples = await scrape_async(active_port)
        return samples if samples.get("kafka_controller_kafkacontroller_globalpartitioncount") == 2 else None

    samples = await wait_until(settled, "the active controller to report 2 partitions")
    assert samples["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    assert samples["kafka_controller_kafkacontroller_globaltopiccount"] == 1
    assert samples["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
    assert samples["kafka_controller_kafkacontroller_controllerepoch"] == epoch
    for broker_id, broker in cluster.simulated.items():
        assert (
            samples[f'kafka_controller_kafkacontroller_brokerepoch{{broker_id="{broker_id}"}}']
            == broker.epoch
        )
        assert f'kafka_controller_controllerchannelmanager_queuesize{{broker_id="{broker_id}"}}' in samples
    assert samples["kafka_controller_controllerstats_topicchangerateandtimems_count"] >= 1
    assert samples["kafka_controller_controllereventmanager_eventqueuetimems_count"] >= 1
    assert "kafka_controller_controllereventmanager_eventqueuesize" in samples
    assert "kafka_controller_controllerstats_uncleanleaderelectionspersec_total" in samples
    assert samples["kafka_controller_controllerstats_uncleanleaderelections_total"] == 0
    assert samples['kafka_controller_controllerstats_topicchangerateandtimems{quantile="0.99"}'] >= 0
    assert samples["kafka_controller_controllerstats_topicchangerateandtimems_histogram_count"] >= 1
    assert samples["kafka_controller_kafkacontroller_replicasineligibletodeletecount"] == 0
    assert samples["kafka_server_sessionexpirelistener_zookeepersyncconnects_total"] == 1
    assert samples['kafka_server_sessionexpirelistener_sessionstate{state="CONNECTED"}'] == 1
    assert samples["kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"] > 0
    assert samples["process_resident_memory_bytes"] > 0
    standby_samples = await scrape_async(standby_port)
    assert standby_samples["kafka_controller_kafkacontroller_activecontrollercount"] == 0
    assert standby_samples["kafka_controller_kafkacontroller_globalpartitioncount"] == 0
    # docs/metrics.md lists exactly what a controller exports.
    page = metrics_reference.PAGE.read_text(encoding="utf-8")
    exposed = metrics_reference.exposed_names(await scrape_text_async(active_port))
    assert exposed == metrics_reference.documented_names(page, "controller")
