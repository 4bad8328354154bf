"""Apache Kafka 3.9's LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 handled at IBP 3.9.

KafkaApis reads them in the KAFKA dialect, with a real ReplicaManager and MetadataCache.

Kafka's own rules (``KafkaApis.scala``, ``ReplicaManager.scala`` at 3.9), beside the checks every
version keeps: a LeaderAndIsr v7 answers by topic id; a topic id other than the one the partition's log
records is INCONSISTENT_TOPIC_ID for that partition (one at the same leader epoch may still be recorded
where the log had none); a StopReplica leader epoch below the partition's is FENCED_LEADER_EPOCH while
-1 and -2 pass; a request from a KRaft controller is refused as a broker outside a migration refuses it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import BrokerIdentity, KafkaApis
from broker.controller_address import controller_in_metadata
from broker.log import LogConfig
from broker.log.partition_metadata import PARTITION_METADATA_FILE, read_topic_id
from broker.log_manager import LogManager
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request, Result
from daemon.eventlog import EventLog
from protocol import (
    ApiKey,
    ErrorCode,
    WireDialect,
    decode_request_header,
    decode_response,
    encode_request,
)
from tests.support.requests import (
    BROKER_ID,
    CONTROLLER_ID,
    lai_partition,
    leader_and_isr,
    stop_replica,
    topic_id_of,
    um_partition,
    update_metadata,
)
from zkstore.znodes import TopicPartition, format_topic_id

KAFKA = WireDialect.KAFKA
EPOCH = 1000
LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
V = {LAI: 7, UM: 8, SR: 4}
T_ID = topic_id_of("t")
OTHER_ID = topic_id_of("another topic once named t")
NO_FUTURE = cast("asyncio.Future[Result]", None)


class Broker:
    """Broker 1 at IBP 3.9: KafkaApis reading control requests in the KAFKA dialect."""

    def __init__(self, log_dir: Path, epoch: int = EPOCH) -> None:
        self.log_dir = log_dir
        self.events = EventLog(None, f"broker-{BROKER_ID}")
        self.identity = BrokerIdentity(BROKER_ID, epoch)
        self.logs = LogManager(log_dir, LogConfig(), self.events)
        self.logs.load()
        self.rm = ReplicaManager(BROKER_ID, log_dir, self.events, log_manager=self.logs)
        self.cache = MetadataCache()
        self.apis = KafkaApis(self.identity, self.rm, self.cache, self.events, dialect=KAFKA)

    def send(self, api_key: ApiKey, body: dict[str, Any], correlation_id: int = 1) -> dict[str, Any]:
        version = V[api_key]
        frame = encode_request(api_key, version, correlation_id, "controller", body, dialect=KAFKA)
        header, offset = decode_request_header(frame, dialect=KAFKA)
        now = time.monotonic()
        request = Request(header, frame, offset, "CONTROLLER", "127.0.0.1:1", now, NO_FUTURE, dequeued_at=now)
        result = self.apis.handle(request)
        assert isinstance(result, bytes), result
        got, response = decode_response(api_key, version, result, dialect=KAFKA)
        assert got == correlation_id
        return response

    def partition(self, topic: str = "t", index: int = 0) -> Any:
        return self.rm.partitions.get(TopicPartition(topic, index))

    def state(self) -> tuple[Any, ...]:
        partitions = {
            tp: (p.replicas, p.leader, p.leader_epoch, p.isr, p.stopped, p.topic_id)
            for tp, p in self.rm.partitions.items()
        }
        return partitions, self.cache.snapshot, self.rm.controller_epoch

    def last(self, kind: str) -> dict[str, Any]:
        return next(e for e in reversed(self.events.recent) if e["kind"] == kind)


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return Broker(tmp_path)


def lai(
    partitions: list[dict[str, Any]] | None = None,
    *,
    broker_epoch: int = EPOCH,
    topic_id: uuid.UUID = T_ID,
    controller_epoch: int = 1,
    kraft: bool = False,
) -> dict[str, Any]:
    states = partitions if partitions is not None else [lai_partition(0, controller_epoch=controller_epoch)]
    return leader_and_isr(
        7,
        broker_epoch,
        {"t": states},
        controller_epoch=controller_epoch,
        topic_ids={"t": topic_id},
        kraft=kraft,
        dialect=KAFKA,
    )


def by_id(response: dict[str, Any]) -> dict[tuple[uuid.UUID, int], int]:
    """A LeaderAndIsr v5+ answer's errors by (topic id, partition)."""
    return {
        (t["topic_id"], p["partition_index"]): p["error_code"]
        for t in response["topics"]
        for p in t["partition_errors"]
    }


# ---------------------------------------------------------------- LeaderAndIsr v7


def test_leader_and_isr_v7_makes_a_leader_and_a_follower_and_answers_by_topic_id(broker: Broker) -> None:
    states = [lai_partition(0), lai_partition(1, leader=2)]
    response = broker.send(LAI, lai(states))
    assert "partition_errors" not in response
    assert response == {
        "error_code": ErrorCode.NONE,
        "topics": [
            {
                "topic_id": T_ID,
                "partition_errors": [
                    {"partition_index": 0, "error_code": ErrorCode.NONE},
                    {"partition_index": 1, "error_code": ErrorCode.NONE},
                ],
            }
        ],
    }
    leader, follower = broker.partition("t", 0), broker.partition("t", 1)
    assert (leader.leader, leader.topic_id, follower.leader, follower.topic_id) == (1, T_ID, 2, T_ID)
    assert broker.last("become_leader")["topic_id"] == format_topic_id(T_ID)
    handled = broker.last("control_request_handled")
    assert (handled["api_version"], handled["broker_epoch"], handled["error"]) == (7, EPOCH, "NONE")


@pytest.mark.parametrize(
    ("broker_epoch", "applied"), [(EPOCH - 1, False), (-1, True), (EPOCH, True), (EPOCH + 1, True)]
)
def test_leader_and_isr_v7_broker_epoch_older_than_ours_is_stale_and_minus_one_is_not(
    broker: Broker, broker_epoch: int, applied: bool
) -> None:
    before = broker.state()
    response = broker.send(LAI, lai([lai_partition(0), lai_partition(1)], broker_epoch=broker_epoch))
    if applied:
        assert set(by_id(response).values()) == {ErrorCode.NONE}
        return
    assert response["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert by_id(response) == {
        (T_ID, 0): ErrorCode.STALE_BROKER_EPOCH,
        (T_ID, 1): ErrorCode.STALE_BROKER_EPOCH,
    }
    assert broker.state() == before
    assert broker.last("control_request_handled")["error"] == "STALE_BROKER_EPOCH"


def test_a_new_registration_makes_a_v7_request_for_the_previous_one_stale(broker: Broker) -> None:
    body = lai()
    broker.identity.epoch = EPOCH + 7
    assert broker.send(LAI, body)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert broker.partition() is None


def test_leader_and_isr_v7_from_an_older_controller_epoch_is_stale_by_topic_id(broker: Broker) -> None:
    assert (
        broker.send(LAI, lai([lai_partition(0, controller_epoch=5)], controller_epoch=5))["error_code"] == 0
    )
    before = broker.state()
    response = broker.send(
        LAI, lai([lai_partition(0, leader_epoch=9, controller_epoch=4)], controller_epoch=4)
    )
    assert response["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert by_id(response) == {(T_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    assert broker.state() == before


def test_another_topic_id_than_the_partitions_is_inconsistent_for_that_partition_only(broker: Broker) -> None:
    broker.send(LAI, lai([lai_partition(0)]))
    body = leader_and_isr(
        7,
        EPOCH,
        {"t": [lai_partition(0, leader=2, leader_epoch=2)], "u": [lai_partition(0)]},
        topic_ids={"t": OTHER_ID, "u": topic_id_of("u")},
        dialect=KAFKA,
    )
    response = broker.send(LAI, body)
    assert response["error_code"] == ErrorCode.NONE
    assert by_id(response) == {
        (OTHER_ID, 0): ErrorCode.INCONSISTENT_TOPIC_ID,
        (topic_id_of("u"), 0): ErrorCode.NONE,
    }
    t0 = broker.partition("t", 0)
    assert (t0.leader, t0.leader_epoch, t0.topic_id) == (BROKER_ID, 1, T_ID)


def test_the_topic_id_is_kept_in_kafkas_partition_metadata_and_checked_after_a_restart(
    tmp_path: Path,
) -> None:
    first = Broker(tmp_path)
    first.send(LAI, lai([lai_partition(0)]))
    metadata = tmp_path / "t-0" / PARTITION_METADATA_FILE
    assert metadata.read_text() == f"version: 0\ntopic_id: {format_topic_id(T_ID)}"
    first.logs.shutdown()

    restarted = Broker(tmp_path, epoch=EPOCH + 1)
    stale_log = restarted.send(
        LAI, lai([lai_partition(0, leader_epoch=2)], broker_epoch=EPOCH + 1, topic_id=OTHER_ID)
    )
    assert by_id(stale_log) == {(OTHER_ID, 0): ErrorCode.INCONSISTENT_TOPIC_ID}
    assert restarted.partition() is None
    same = restarted.send(LAI, lai([lai_partition(0, leader_epoch=2)], broker_epoch=EPOCH + 1))
    assert by_id(same) == {(T_ID, 0): ErrorCode.NONE}
    assert read_topic_id(tmp_path / "t-0") == T_ID


def test_at_the_same_leader_epoch_a_topic_id_is_recorded_once_then_the_request_is_stale(
    broker: Broker,
) -> None:
    """Kafka's upgrade path: a partition created from a request without ids (LeaderAndIsr v2) takes the
    id a v7 of the same leader epoch brings; the same request again is stale."""
    assert broker.send(LAI, lai([lai_partition(0)], topic_id=uuid.UUID(int=0)))["error_code"] == 0
    assert broker.partition().topic_id is None
    assert by_id(broker.send(LAI, lai([lai_partition(0)]))) == {(T_ID, 0): ErrorCode.NONE}
    assert broker.partition().topic_id == T_ID
    assert read_topic_id(broker.log_dir / "t-0") == T_ID
    assert by_id(broker.send(LAI, lai([lai_partition(0)]))) == {(T_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH}


def test_a_partition_without_this_broker_is_unknown_and_the_zero_topic_id_is_answered_as_given(
    broker: Broker,
) -> None:
    body = lai([lai_partition(0, replicas=(2, 3), leader=2)], topic_id=uuid.UUID(int=0))
    response = broker.send(LAI, body)
    assert by_id(response) == {(uuid.UUID(int=0), 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_adding_and_removing_replicas_and_the_recovery_state_are_taken(broker: Broker) -> None:
    states = [
        lai_partition(0, replicas=(1, 2, 3), isr=(1, 2), adding=(3,), removing=(2,), recovery=1),
        lai_partition(1, leader=2, replicas=(1, 2), recovery=1),
    ]
    assert set(by_id(broker.send(LAI, lai(states))).values()) == {ErrorCode.NONE}
    leader, follower = broker.partition("t", 0), broker.partition("t", 1)
    assert (leader.adding_replicas, leader.removing_replicas) == ((3,), (2,))
    assert leader.leader_recovery_state == 0, "a leader elected while recovering marks itself recovered"
    assert follower.leader_recovery_state == 1
    assert broker.rm.under_replicated_count() == 0, "a replica being added does not count yet (Kafka)"
    became = next(e for e in broker.events.recent if e["kind"] == "become_leader")
    assert (became["adding_replicas"], became["removing_replicas"]) == ([3], [2])


# ---------------------------------------------------------------- StopReplica v4 (Kafka's layout)


def lead(broker: Broker, *partitions: int, leader_epoch: int = 5) -> None:
    states = [lai_partition(p, leader_epoch=leader_epoch) for p in partitions]
    assert set(by_id(broker.send(LAI, lai(states))).values()) == {ErrorCode.NONE}


def sr(partitions: list[int], *, delete: bool = False, **kw: Any) -> dict[str, Any]:
    return stop_replica(
        4, kw.pop("broker_epoch", EPOCH), {"t": partitions}, delete=delete, dialect=KAFKA, **kw
    )


def errors_of(response: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(p["topic_name"], p["partition_index"]): p["error_code"] for p in response["partition_errors"]}


def test_stop_replica_v4_below_the_leader_epoch_is_fenced_and_at_or_above_it_stops(broker: Broker) -> None:
    lead(broker, 0, 1, 2)
    epochs = {("t", 0): 4, ("t", 1): 5, ("t", 2): 6}
    response = broker.send(SR, sr([0, 1, 2], leader_epochs=epochs))
    assert response["error_code"] == ErrorCode.NONE
    assert errors_of(response) == {
        ("t", 0): ErrorCode.FENCED_LEADER_EPOCH,
        ("t", 1): ErrorCode.NONE,
        ("t", 2): ErrorCode.NONE,
    }
    assert not broker.partition("t", 0).stopped
    assert broker.partition("t", 1).stopped and broker.partition("t", 2).stopped


@pytest.mark.parametrize("leader_epoch", [-2, -1], ids=["during-delete", "no-epoch"])
def test_stop_replica_v4_deletes_whatever_the_leader_epoch_with_the_sentinels(
    broker: Broker, leader_epoch: int
) -> None:
    lead(broker, 0)
    response = broker.send(SR, sr([0], delete=True, leader_epoch=leader_epoch))
    assert errors_of(response) == {("t", 0): ErrorCode.NONE}
    assert broker.partition() is None
    assert not (broker.log_dir / "t-0").exists()
    stopped = broker.last("stop_replica")
    assert (stopped["delete"], stopped["leader_epoch"]) == (True, leader_epoch)


def test_stop_replica_v4_deletes_per_partition(broker: Broker) -> None:
    lead(broker, 0, 1)
    body = stop_replica(4, EPOCH, {"t": [0, 1]}, delete=True, leader_epoch=5, dialect=KAFKA)
    body["topic_states"][0]["partition_states"][1]["delete_partition"] = False
    assert set(errors_of(broker.send(SR, body)).values()) == {ErrorCode.NONE}
    assert broker.partition("t", 0) is None
    assert broker.partition("t", 1).stopped


def test_stop_replica_v4_of_a_partition_not_hosted_is_answered_none(broker: Broker) -> None:
    assert errors_of(broker.send(SR, sr([3], delete=True, leader_epoch=1))) == {("t", 3): ErrorCode.NONE}


def test_stop_replica_v4_keeps_the_broker_and_controller_epoch_checks(broker: Broker) -> None:
    lead(broker, 0)
    stale = broker.send(SR, sr([0], delete=True, broker_epoch=EPOCH - 1))
    assert stale == {"error_code": ErrorCode.STALE_BROKER_EPOCH, "partition_errors": []}
    assert broker.send(LAI, lai([lai_partition(0, leader_epoch=6, controller_epoch=3)], controller_epoch=3))
    older = broker.send(SR, sr([0], delete=True, controller_epoch=2))
    assert older == {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
    assert broker.partition() is not None


# ---------------------------------------------------------------- UpdateMetadata v8


def test_update_metadata_v8_caches_topic_ids_and_the_controller_among_live_brokers(broker: Broker) -> None:
    body = update_metadata(
        8, EPOCH, {"t": [um_partition(0)], "u": [um_partition(0)]}, controller_id=2, dialect=KAFKA
    )
    body["type"] = 2  # a KRaft migration's full snapshot: a ZooKeeper-mode broker ignores it
    assert broker.send(UM, body) == {"error_code": ErrorCode.NONE}
    snapshot = broker.cache.snapshot
    assert snapshot.topic_ids == {"t": T_ID, "u": topic_id_of("u")}
    assert controller_in_metadata(snapshot, "CONTROLLER") == (2, "broker-2", 9093)
    gone = update_metadata(8, EPOCH, {"u": [um_partition(0, leader=-2)]}, controller_id=2, dialect=KAFKA)
    assert broker.send(UM, gone) == {"error_code": ErrorCode.NONE}
    assert broker.cache.snapshot.topic_ids == {"t": T_ID}


@pytest.mark.parametrize(
    ("broker_epoch", "error"), [(EPOCH - 1, ErrorCode.STALE_BROKER_EPOCH), (-1, ErrorCode.NONE)]
)
def test_update_metadata_v8_broker_epoch(broker: Broker, broker_epoch: int, error: ErrorCode) -> None:
    assert broker.send(UM, update_metadata(8, broker_epoch, dialect=KAFKA)) == {"error_code": error}
    assert bool(broker.cache.snapshot.brokers) == (error == ErrorCode.NONE)


def test_update_metadata_v8_from_an_older_controller_epoch_is_stale(broker: Broker) -> None:
    broker.send(UM, update_metadata(8, EPOCH, controller_epoch=3, dialect=KAFKA))
    older = update_metadata(8, EPOCH, controller_epoch=2, live=(1, 2, 3), dialect=KAFKA)
    assert broker.send(UM, older) == {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
    assert set(broker.cache.snapshot.brokers) == {1, 2}


# ---------------------------------------------------------------- from a KRaft controller


@pytest.mark.parametrize("api_key", [LAI, UM, SR], ids=lambda k: k.name)
def test_a_request_from_a_kraft_controller_is_refused_and_changes_nothing(
    broker: Broker, api_key: ApiKey
) -> None:
    lead(broker, 0)
    before = broker.state()
    body = {
        LAI: lai([lai_partition(0, leader=2, leader_epoch=9)], kraft=True),
        UM: update_metadata(8, EPOCH, kraft=True, dialect=KAFKA),
        SR: sr([0], delete=True, kraft=True),
    }[api_key]
    response = broker.send(api_key, body)
    assert response["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert broker.state() == before


def test_control_request_events_name_kafkas_epoch_field(broker: Broker) -> None:
    broker.send(UM, update_metadata(8, EPOCH - 3, dialect=KAFKA))
    handled = broker.last("control_request_handled")
    assert (handled["api"], handled["api_version"], handled["error"]) == (
        "UpdateMetadata",
        8,
        "STALE_BROKER_EPOCH",
    )
    assert (handled["broker_epoch"], handled["broker_epoch_now"], handled["controller_id"]) == (
        EPOCH - 3,
        EPOCH,
        CONTROLLER_ID,
    )
