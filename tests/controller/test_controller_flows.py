"""Controller behaviour end to end, in process: a real ZooKeeper, a real Controller, scripted brokers.

Running the controller in the test's event loop lets these tests look at its context and counters;
``test_controller_process.py`` covers the daemon as a separate process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controller import queries
from controller.config import load
from controller.controller import Controller
from controller.handlers import preferred_election
from controller.state_tables import PartitionState
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode
from tests.support.broker_sim import SimulatedBroker
from tests.support.requests import alter_partition_request
from tests.support.waiting import wait_until
from tests.support.zookeeper import ConnectionCutter, expire_session, partition_state, session
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.fencing import ControllerMoved
from zkstore.topic_writes import create_topic

pytestmark = pytest.mark.zookeeper

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA


class Harness:
    def __init__(self, zk_connect: str, tmp_path: Path, admin: AsyncZooKeeper) -> None:
        self.zk_connect = zk_connect
        self.tmp_path = tmp_path
        self.admin = admin
        self.brokers: dict[int, SimulatedBroker] = {}
        self.controller: Controller | None = None

    async def start(self, broker_ids: tuple[int, ...] = (1, 2, 3), **settings: Any) -> Controller:
        for broker_id in broker_ids:
            broker = SimulatedBroker(broker_id, self.zk_connect)
            await broker.start()
            self.brokers[broker_id] = broker
        environ = {
            "KAFKA_CONTROLLER_ID": "1001",
            "KAFKA_ZOOKEEPER_CONNECT": self.zk_connect,
            "KAFKA_CONTROL_PLANE_LISTENER_NAME": "CONTROLLER",
            "KAFKA_AUTO_LEADER_REBALANCE_ENABLE": "false",
            **{"KAFKA_" + k.upper(): str(v) for k, v in settings.items()},
        }
        config = load(None, environ)
        self.events = EventLog(self.tmp_path / "events.jsonl", "controller-1001")
        self.controller = Controller(config, event_log=self.events)
        await self.controller.start()
        await self.wait_event("failover_complete")
        return self.controller

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events.recent if e["kind"] == kind]

    async def wait_event(self, kind: str, timeout: float = 15.0, **fields: Any) -> dict[str, Any]:
        def found() -> bool:
            return any(all(e.get(k) == v for k, v in fields.items()) for e in self.events_of(kind))

        await wait_until(found, f"event {kind} {fields}", timeout=timeout)
        return next(e for e in self.events_of(kind) if all(e.get(k) == v for k, v in fields.items()))

    async def topic(self, name: str, replicas: dict[int, tuple[int, ...]]) -> None:
        await create_topic(self.admin, name, replicas)
        ctx = self.controller.context
        wanted = {znodes.TopicPartition(name, p) for p in replicas}
        await wait_until(lambda: wanted <= ctx.leadership.keys(), what=f"topic {name} online")

    def leader(self, topic: str, partition: int) -> int:
        info = self.controller.context.leadership[znodes.TopicPartition(topic, partition)]
        return info.leader_and_isr.leader

    async def close(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        for broker in self.brokers.values():
            await broker.stop()
        await self.admin.close()


@pytest.fixture
async def harness(zk_connect: str, tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(zk_connect, tmp_path, await session(zk_connect))
    try:
        yield h
    finally:
        await h.close()


async def wait_absent(zk: AsyncZooKeeper, path: str) -> None:
    async def absent() -> bool:
        return await zk.exists(path) is None

    await wait_until(absent, f"{path} to be deleted")


@contextlib.asynccontextmanager
async def cut_off(harness: Harness, zk_connect: str) -> AsyncIterator[tuple[ConnectionCutter, str]]:
    """A ``ConnectionCutter`` in front of the test's ZooKeeper and the connect string through it; the
    controller stops before the cutter does (stopping, it still talks to ZooKeeper)."""
    server, _, chroot = zk_connect.partition("/")
    cutter = ConnectionCutter(server)
    port = await cutter.start()
    try:
        yield cutter, f"127.0.0.1:{port}/{chroot}"
    finally:
        if harness.controller is not None:
            await harness.controller.stop()
            harness.controller = None
        await cutter.close()


def partitions_in(request_body: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for t in request_body["topic_states"] for s in t["partition_states"]]


def lai_for(topic: str, partition: int, check: Callable[[dict[str, Any]], bool] = lambda s: True):
    return lambda r: (
        r.api_key == LAI
        and any(
            t["topic_name"] == topic and s["partition_index"] == partition and check(s)
            for t in r.body["topic_states"]
            for s in t["partition_states"]
        )
    )


@pytest.mark.parametrize(
    ("ibp", "expected_encodes"),
    # The seeds' wire: the three brokers get the same LeaderAndIsr (every broker hosts every
    # partition), encoded once like the UpdateMetadata.
    [("2.3-IV2", 1 + 1), ("2.2", 3 + 3)],
    ids=["max-broker-epoch-encodes-update-metadata-once", "per-broker-encodes-one-per-broker"],
)
async def test_topic_creation_encodes_update_metadata_once_per_change(
    harness: Harness, ibp: str, expected_encodes: int
) -> None:
    controller = await harness.start(inter_broker_protocol_version=ibp)
    before = controller.stats.encodes
    await harness.topic("clicks", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    for broker in harness.brokers.values():
        um = await broker.wait_for(lambda r: r.api_key == UM and r.body["topic_states"])
        assert {s["partition_index"] for s in partitions_in(um.body)} == {0, 1, 2}
    assert controller.stats.encodes - before == expected_encodes  # LeaderAndIsr(s) + UpdateMetadata(s)
    for p, leader in enumerate((1, 2, 3)):
        state, version = await partition_state(harness.admin, "clicks", p)
        assert (state.leader, state.leader_epoch, version) == (leader, 0, 0)
        assert state.controller_epoch == controller.context.epoch
    lai = await harness.brokers[2].wait_for(lai_for("clicks", 0))
    assert all(s["is_new"] for s in partitions_in(lai.body))


async def test_partitions_added_to_a_topic_are_created_and_announced(harness: Harness) -> None:
    await harness.start()
    await harness.topic("grow", {0: (1, 2)})
    grown = znodes.TopicAssignment(
        "grow", {0: (1, 2), 1: (3, 1)}, topic_id=harness.controller.context.topic_ids["grow"]
    )
    await harness.admin.set(znodes.topic_path("grow"), grown.encode())
    await wait_until(
        lambda: znodes.TopicPartition("grow", 1) in harness.controller.context.leadership, "grow-1 created"
    )
    lai = await harness.brokers[3].wait_for(lai_for("grow", 1, lambda s: s["is_new"] and s["leader"] == 3))
    assert lai.error == ErrorCode.NONE
    await harness.wait_event("partitions_added", topic="grow")


async def test_on_kafkas_wire_replicas_placed_on_the_controller_are_handed_to_brokers(
    harness: Harness,
) -> None:
    """Listed among the live brokers at IBP 3.9, controller 1001 may find itself in an assignment a broker
    computed; new topics and added partitions get a live broker in its place before they are created.
    (The simulated brokers do not answer LeaderAndIsr v7: only the controller's decisions are checked.)"""
    controller = await harness.start(inter_broker_protocol_version="3.9")
    await create_topic(harness.admin, "placed", {0: (1001, 2), 1: (3, 1001)})
    await harness.wait_event("replicas_moved_off_controller", topic="placed")
    assert controller.context.assignments["placed"] == {0: (1, 2), 1: (3, 2)}
    grown = znodes.TopicAssignment(
        "placed", {0: (1, 2), 1: (3, 2), 2: (1001, 1)}, topic_id=controller.context.topic_ids["placed"]
    )
    await harness.admin.set(znodes.topic_path("placed"), grown.encode())
    await wait_until(
        lambda: znodes.TopicPartition("placed", 2) in controller.context.leadership, "placed-2 created"
    )
    assert controller.context.assignments["placed"][2] == (2, 1)
    data, _ = await harness.admin.get(znodes.topic_path("placed"))
    stored = znodes.decode_topic_assignment(data, znodes.topic_path("placed"))
    assert stored is not None and stored.partitions == {0: (1, 2), 1: (3, 2), 2: (2, 1)}
    assert harness.leader("placed", 2) == 2


async def test_watches_dropped_with_a_lost_connection_are_re_armed_on_reconnect(
    harness: Harness, zk_connect: str
) -> None:
    """kazoo drops every watch when its connection drops, even though the session lives on. Partitions
    added while the controller was cut off, and partitions added after it reconnected, are both seen."""
    async with cut_off(harness, zk_connect) as (cutter, connect):
        controller = await harness.start(zookeeper_connect=connect)
        await harness.topic("grow", {0: (1, 2)})
        epoch, topic_id = controller.context.epoch, controller.context.topic_ids["grow"]

        cutter.cut(hold=True)
        await wait_until(lambda: controller.zk.client.state == "SUSPENDED", what="the controller is cut off")
        while_away = znodes.TopicAssignment("grow", {0: (1, 2), 1: (2, 3)}, topic_id=topic_id)
        await harness.admin.set(znodes.topic_path("grow"), while_away.encode())
        cutter.release()
        await wait_until(
            lambda: znodes.TopicPartition("grow", 1) in controller.context.leadership,
            timeout=30,
            what="the partition added while disconnected is created",
        )

        after = znodes.TopicAssignment("grow", {0: (1, 2), 1: (2, 3), 2: (3, 1)}, topic_id=topic_id)
        await harness.admin.set(znodes.topic_path("grow"), after.encode())
        await wait_until(
            lambda: znodes.TopicPartition("grow", 2) in controller.context.leadership,
            what="the partition added after reconnecting is created: the topic's watch was re-armed",
        )
        assert controller.is_active and controller.context.epoch == epoch, "a blip is not a resignation"


async def test_broker_failure_elects_from_the_isr_and_counts_partitions_left_offline(
    harness: Harness,
) -> None:
    controller = await harness.start()
    await harness.topic("events", {0: (1, 2, 3), 1: (1,)})
    epoch0 = (await partition_state(harness.admin, "events", 0))[0].leader_epoch
    await harness.brokers[1].stop()
    await wait_until(lambda: harness.leader("events", 0) == 2, what="leader 2 for events-0")
    state, _ = await partition_state(harness.admin, "events", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (2, (2, 3), epoch0 + 1)
    await harness.brokers[3].wait_for(lai_for("events", 0, lambda s: s["leader"] == 2 and s["isr"] == [2, 3]))
    tp1 = znodes.TopicPartition("events", 1)
    await wait_until(
        lambda: controller.context.partition_states[tp1] is PartitionState.OFFLINE, f"{tp1} offline"
    )
    assert queries.offline_partitions_count(controller.context) == 1
    lone, _ = await partition_state(harness.admin, "events", 1)
    assert lone.leader == znodes.NO_LEADER and lone.isr == (1,)  # kept: it is the last in-sync replica

    returning = SimulatedBroker(1, harness.zk_connect)
    await returning.start()
    harness.brokers[1] = returning
    await wait_until(lambda: harness.leader("events", 1) == 1, what="events-1 back online")
    assert queries.offline_partitions_count(controller.context) == 0


def failing_write(controller: Controller, error: Exception) -> None:
    """The controller's next ZooKeeper write fails with ``error``; the ones after it succeed."""
    store = controller.store
    original, original_stream = store.commit, store.commit_stream

    def restore() -> None:
        store.commit = original  # type: ignore[method-assign]
        store.commit_stream = original_stream  # type: ignore[method-assign]

    async def commit(ops: Any) -> Any:
        restore()
        raise error

    async def commit_stream(ops: Any, answered: Any = None) -> Any:
        restore()
        raise error

    store.commit = commit  # type: ignore[method-assign]
    store.commit_stream = commit_stream  # type: ignore[method-assign]


@pytest.mark.parametrize(
    ("error", "alter_partition_error", "controlled_shutdown_error"),
    [
        (ControllerMoved("deposed"), ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_CONTROLLER_EPOCH),
        (RuntimeError("boom"), ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
    ids=["fenced-write", "unexpected-error"],
)
async def test_an_rpc_whose_handling_fails_is_answered_at_once(
    harness: Harness, error: Exception, alter_partition_error: ErrorCode, controlled_shutdown_error: ErrorCode
) -> None:
    """Kafka answers with the error of the exception, never leaving the broker to its 30 s timeout."""
    controller = await harness.start()
    await harness.topic("fragile", {0: (1, 2)})
    state, version = await partition_state(harness.admin, "fragile", 0)
    shrink = alter_partition_request(1, harness.brokers[1].epoch, "fragile", state, version, [1], version=1)
    failing_write(controller, error)
    answer = await asyncio.wait_for(controller.handle_alter_partition(shrink, 1), 5)
    assert answer["error_code"] == alter_partition_error
    if isinstance(error, ControllerMoved):
        await harness.wait_event("write_fenced")
        await wait_until(lambda: controller.is_active, what="the controller elected again")
    failing_write(controller, error)
    reply = await asyncio.wait_for(controller.handle_controlled_shutdown(2, harness.brokers[2].epoch), 5)
    assert reply["error_code"] == controlled_shutdown_error


async def test_an_isr_change_whose_reply_was_lost_is_recognised_as_written(
    harness: Harness, zk_connect: str
) -> None:
    """The state write is applied, its reply lost with the connection; sent again it finds the znode
    one version on, holding exactly what we wrote: that is success, not a stale version."""
    async with cut_off(harness, zk_connect) as (cutter, connect):
        controller = await harness.start(zookeeper_connect=connect)
        await harness.topic("blip", {0: (1, 2)})
        state, version = await partition_state(harness.admin, "blip", 0)
        shrink = alter_partition_request(1, harness.brokers[1].epoch, "blip", state, version, [1], version=1)
        cutter.lose_replies(after=znodes.partition_state_path("blip", 0).encode())
        answering = asyncio.create_task(controller.handle_alter_partition(shrink, 1))

        async def applied() -> bool:
            return (await partition_state(harness.admin, "blip", 0))[0].isr == (1,)

        await wait_until(applied, what="the ISR change applied")
        cutter.cut(hold=False)
        answer = await asyncio.wait_for(answering, 30)
        partition = answer["topics"][0]["partitions"][0]
        assert (partition["error_code"], partition["isr"]) == (ErrorCode.NONE, [1])
        assert controller.context.leadership[znodes.TopicPartition("blip", 0)].leader_and_isr.isr == (1,)


async def test_unclean_election_only_when_enabled(harness: Harness) -> None:
    controller = await harness.start(unclean_leader_election_enable="true")
    await harness.topic("risky", {0: (1, 2)})
    state, version = await partition_state(harness.admin, "risky", 0)
    shrink = alter_partition_request(1, harness.brokers[1].epoch, "risky", state, version, [1], version=1)
    answer = await controller.handle_alter_partition(shrink, 1)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    await harness.brokers[1].stop()
    await wait_until(lambda: harness.leader("risky", 0) == 2, what="unclean leader 2")
    state, _ = await partition_state(harness.admin, "risky", 0)
    assert state.isr == (2,) and state.leader_recovery_state == znodes.LeaderRecoveryState.RECOVERING
    assert controller.stats.unclean_elections == 1
    assert (await harness.wait_event("leader_and_isr_change", topic="risky", leader=2))["unclean"] is True


async def test_topic_deletion_stops_and_deletes_replicas_then_removes_the_znodes(harness: Harness) -> None:
    controller = await harness.start()
    await harness.topic("doomed", {0: (1, 2), 1: (2, 3)})
    await harness.admin.create(znodes.delete_topic_path("doomed"), makepath=True)
    await harness.wait_event("topic_deleted", topic="doomed")
    assert await harness.admin.exists(znodes.topic_path("doomed")) is None
    assert await harness.admin.exists(znodes.delete_topic_path("doomed")) is None
    assert "doomed" not in controller.context.assignments
    for broker_id in (1, 2, 3):
        stop = await harness.brokers[broker_id].wait_for(
            lambda r: r.api_key == SR and r.body["delete_partitions"]
        )
        assert stop.error == ErrorCode.NONE
        um = await harness.brokers[broker_id].wait_for(
            lambda r: r.api_key == UM and any(s["leader"] == -2 for s in partitions_in(r.body))
        )
        assert um.error == ErrorCode.NONE
        assert not any(tp.topic == "doomed" for tp in harness.brokers[broker_id].metadata()["partitions"])


async def test_deletion_requests_are_dropped_when_deletion_is_disabled(harness: Harness) -> None:
    controller = await harness.start(delete_topic_enable="false")
    await harness.topic("kept", {0: (1, 2)})
    await harness.admin.create(znodes.delete_topic_path("kept"), makepath=True)
    await harness.wait_event("topic_deletion_disabled")
    await wait_until(lambda: not controller.context.topics_to_delete, "every deletion finished")
    assert await harness.admin.exists(znodes.delete_topic_path("kept")) is None
    assert await harness.admin.exists(znodes.topic_path("kept")) is not None


async def test_failover_removes_queued_deletions_when_deletion_is_disabled(harness: Harness) -> None:
    """Kafka's TopicDeletionManager.init: with delete.topic.enable=false, a new controller removes the
    queued requests instead of carrying them out."""
    await create_topic(harness.admin, "kept", {0: (1, 2)})
    await harness.admin.create(znodes.delete_topic_path("kept"), makepath=True)
    controller = await harness.start(delete_topic_enable="false")
    await wait_absent(harness.admin, znodes.delete_topic_path("kept"))
    assert await harness.admin.exists(znodes.topic_path("kept")) is not None
    assert not controller.context.topics_to_delete
    assert "kept" in controller.context.assignments
    assert not harness.events_of("topic_deleted")


async def test_a_broker_death_is_announced_even_when_every_election_fails(harness: Harness) -> None:
    """Kafka sends UpdateMetadata after a broker dies even when no election happened or none
    succeeded, or Metadata answers keep listing the dead broker as alive. Here a partition is already
    offline when broker 3, which hosts nothing, dies: its election is retried and fails again."""
    await harness.start()
    await harness.topic("orphan", {0: (1,)})
    await harness.brokers[1].stop()
    await wait_until(lambda: harness.leader("orphan", 0) == -1, what="orphan-0 offline")
    await harness.brokers[3].stop()
    await wait_until(
        lambda: 3 not in harness.brokers[2].metadata()["live_brokers"],
        what="broker 2 told that broker 3 died",
    )


async def _move_leadership_away_from_1(harness: Harness, topic: str) -> None:
    """Controlled shutdown of 1, then 1 returns and the leader takes it back into the ISR."""
    controller = harness.controller
    reply = await controller.handle_controlled_shutdown(1, harness.brokers[1].epoch)
    assert reply["error_code"] == ErrorCode.NONE
    assert harness.leader(topic, 0) == 2
    await harness.brokers[1].bounce()
    await wait_until(lambda: 1 not in controller.context.shutting_down, what="broker 1 back")
    state, version = await partition_state(harness.admin, topic, 0)
    topic_id = controller.context.topic_ids[topic]
    expand = alter_partition_request(2, harness.brokers[2].epoch, topic_id, state, version, [2, 3, 1])
    answer = await controller.handle_alter_partition(expand, 2)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


async def test_preferred_replica_election_requested_through_zookeeper(harness: Harness) -> None:
    await harness.start()
    await harness.topic("prefs", {0: (1, 2, 3)})
    await _move_leadership_away_from_1(harness, "prefs")
    assert queries.imbalanced_partitions(harness.controller.context)[1] == (1, 1)
    request = znodes.encode_preferred_replica_election([znodes.TopicPartition("prefs", 0)])
    await harness.admin.create(znodes.PREFERRED_REPLICA_ELECTION, request)
    await wait_until(lambda: harness.leader("prefs", 0) == 1, what="preferred leader 1")
    await harness.brokers[1].wait_for(lai_for("prefs", 0, lambda s: s["leader"] == 1))
    await wait_absent(harness.admin, znodes.PREFERRED_REPLICA_ELECTION)


async def test_auto_rebalance_restores_preferred_leaders_above_the_threshold(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preferred_election, "AUTO_REBALANCE_FIRST_DELAY_S", 0.2)
    await harness.start(auto_leader_rebalance_enable="true", leader_imbalance_check_interval_seconds="1")
    await harness.topic("balance", {0: (1, 2, 3)})
    await _move_leadership_away_from_1(harness, "balance")
    await wait_until(lambda: harness.leader("balance", 0) == 1, timeout=15, what="auto rebalance")
    state, _ = await partition_state(harness.admin, "balance", 0)
    assert state.leader == 1 and 1 in state.isr


async def test_reassignment_moves_replicas_once_the_target_is_in_sync(harness: Harness) -> None:
    controller = await harness.start()
    await harness.topic("moving", {0: (1, 2)})
    tp = znodes.TopicPartition("moving", 0)
    await harness.admin.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({tp: (2, 3)}))
    await harness.wait_event("reassignment_started", topic="moving")
    data, _ = await harness.admin.get(znodes.topic_path("moving"))
    during = znodes.decode_topic_assignment(data, znodes.topic_path("moving"))
    assert during is not None
    assert during.partitions[0] == (2, 3, 1) and during.adding_replicas == {0: (3,)}
    assert during.removing_replicas == {0: (1,)}
    await harness.brokers[3].wait_for(
        lai_for("moving", 0, lambda s: s["is_new"] and s["replicas"] == [2, 3, 1])
    )

    state, version = await partition_state(harness.admin, "moving", 0)
    caught_up = alter_partition_request(1, harness.brokers[1].epoch, "moving", state, version, [1, 2, 3], 1)
    answer = await controller.handle_alter_partition(caught_up, 1)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    await harness.wait_event("reassignment_completed", topic="moving")
    assert harness.leader("moving", 0) == 2  # the old leader left the replica set
    data, _ = await harness.admin.get(znodes.topic_path("moving"))
    after = znodes.decode_topic_assignment(data, znodes.topic_path("moving"))
    assert after is not None and after.partitions == {0: (2, 3)}
    assert after.adding_replicas == {} and after.removing_replicas == {}
    await wait_absent(harness.admin, znodes.REASSIGN_PARTITIONS)
    stop = await harness.brokers[1].wait_for(lambda r: r.api_key == SR and r.body["delete_partitions"])
    assert stop.error == ErrorCode.NONE
    assert controller.context.replicas(tp) == (2, 3) and tp not in controller.context.reassignments


async def test_session_expiry_resigns_then_the_controller_wins_again_with_a_new_epoch(
    harness: Harness,
) -> None:
    controller = await harness.start()
    await harness.topic("steady", {0: (1, 2, 3)})
    epoch = controller.context.epoch
    await expire_session(controller.zk)
    resigned = await harness.wait_event("controller_resigned", reason="ZooKeeper session expired")
    assert resigned["controller_epoch"] == epoch
    await harness.wait_event("controller_elected", controller_epoch=epoch + 1, timeout=30)
    await harness.wait_event("failover_complete", controller_epoch=epoch + 1, timeout=30)
    for broker in harness.brokers.values():
        lai = await broker.wait_for(lambda r: r.api_key == LAI and r.body["controller_epoch"] == epoch + 1)
        assert lai.error == ErrorCode.NONE
    assert controller.is_active and controller.context.epoch == epoch + 1
    assert harness.leader("steady", 0) == 1
