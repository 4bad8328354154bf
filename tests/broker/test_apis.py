"""Control request handling (KafkaApis with a real ReplicaManager and MetadataCache), in both epoch modes.

Per-broker mode is KIP-380's LeaderAndIsr v2 / UpdateMetadata v5 / StopReplica v1 (``broker_epoch``);
max-epoch mode is the seed's v5 / v7 / v4 (``max_broker_epoch``). A broker applies the same rule to
both: an epoch older than its own is STALE_BROKER_EPOCH and changes nothing; equal, newer or -1 is
accepted (Kafka's BrokerEpochIntegrationTest, after KAFKA-9839).
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import BrokerIdentity, KafkaApis
from broker.checkpoint import read_offsets, write_offsets
from broker.log import Log, LogConfig
from broker.metadata_cache import CachedBroker, MetadataCache
from broker.replica_manager import HW_CHECKPOINT_FILE, ReplicaManager
from broker.request_channel import Close, Request, Result
from daemon.eventlog import EventLog
from protocol import (
    MAX_BROKER_EPOCH_VERSIONS,
    PER_BROKER_EPOCH_VERSIONS,
    ApiKey,
    ErrorCode,
    decode_request_header,
    decode_response,
    encode_request,
    epoch_field,
)
from tests.broker.log_builders import batch
from tests.support.requests import (
    BROKER_ID,
    CONTROLLER_ID,
    lai_partition,
    leader_and_isr,
    stop_replica,
    um_partition,
    update_metadata,
)
from zkstore.znodes import TopicPartition

EPOCH = 1000
LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
CONTROL = (LAI, UM, SR)

MODES = {"per-broker": PER_BROKER_EPOCH_VERSIONS, "max-epoch": MAX_BROKER_EPOCH_VERSIONS}

NO_FUTURE = cast("asyncio.Future[Result]", None)
"""KafkaApis.handle returns its result; only the network layer uses the future."""


# ---------------------------------------------------------------- the broker under test


@dataclass
class Broker:
    identity: BrokerIdentity
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    events: EventLog
    apis: KafkaApis
    log_dir: Path

    def partition(self, topic: str, index: int) -> Any:
        return self.replica_manager.partitions.get(TopicPartition(topic, index))

    def state(self) -> tuple[Any, ...]:
        """Everything a control request may change, as plain values."""
        rm = self.replica_manager
        partitions = {
            tp: (p.replicas, p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.high_watermark, p.stopped)
            for tp, p in rm.partitions.items()
        }
        return partitions, self.metadata_cache.snapshot, rm.controller_epoch, rm.hw_checkpointing

    def last(self, *kinds: str) -> dict[str, Any]:
        """The most recent event of one of ``kinds``."""
        return next(e for e in reversed(self.events.recent) if e["kind"] in kinds)


def make_broker(log_dir: Path, *, epoch: int = EPOCH, event_file: Path | None = None) -> Broker:
    events = EventLog(event_file, f"broker-{BROKER_ID}")
    identity = BrokerIdentity(BROKER_ID, epoch)
    rm = ReplicaManager(BROKER_ID, log_dir, events)
    cache = MetadataCache()
    return Broker(identity, rm, cache, events, KafkaApis(identity, rm, cache, events), log_dir)


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return make_broker(tmp_path)


@pytest.fixture(params=list(MODES), ids=list(MODES))
def versions(request: pytest.FixtureRequest) -> Mapping[ApiKey, int]:
    return MODES[request.param]


def as_request(
    api_key: int, version: int, body: dict[str, Any], *, correlation_id: int = 1, queued_s: float = 0.0
) -> Request:
    """A Request as a listener would queue it, dequeued ``queued_s`` after it was read."""
    frame = encode_request(api_key, version, correlation_id, f"controller-{CONTROLLER_ID}", body)
    header, offset = decode_request_header(frame)
    now = time.monotonic()
    return Request(
        header, frame, offset, "CONTROLLER", "127.0.0.1:40000", now - queued_s, NO_FUTURE, dequeued_at=now
    )


def send(broker: Broker, api_key: int, version: int, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """Handle one request and decode the answer, checking it carries the request's correlation id."""
    request = as_request(api_key, version, body, **kw)
    result = broker.apis.handle(request)
    assert isinstance(result, bytes), result
    correlation_id, response = decode_response(api_key, version, result)
    assert correlation_id == request.header.correlation_id
    return response


def partition_errors(response: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(p["topic_name"], p["partition_index"]): p["error_code"] for p in response["partition_errors"]}


# ---------------------------------------------------------------- broker epoch (both modes)


def prepare(broker: Broker, versions: Mapping[ApiKey, int]) -> None:
    """Host t-0 as leader (leader epoch 1) and cache t-0 with brokers 1 and 2, at controller epoch 1."""
    assert send(broker, LAI, versions[LAI], leader_and_isr(versions[LAI], EPOCH))["error_code"] == 0
    assert send(broker, UM, versions[UM], update_metadata(versions[UM], EPOCH)) == {"error_code": 0}


def changing_request(api_key: ApiKey, version: int, broker_epoch: int) -> dict[str, Any]:
    """A request from controller epoch 2 that would change what ``prepare`` set up."""
    if api_key == LAI:
        states = [
            lai_partition(0, leader=2, leader_epoch=2, controller_epoch=2),
            lai_partition(1, controller_epoch=2),
        ]
        return leader_and_isr(version, broker_epoch, {"t": states}, controller_epoch=2)
    if api_key == UM:
        states = [um_partition(0, leader=2, leader_epoch=2), um_partition(1)]
        return update_metadata(version, broker_epoch, {"t": states}, controller_epoch=2, live=(1, 2, 3))
    return stop_replica(version, broker_epoch, delete=True, controller_epoch=2)


def assert_applied(broker: Broker, api_key: ApiKey) -> None:
    if api_key == LAI:
        t0, t1 = broker.partition("t", 0), broker.partition("t", 1)
        assert (t0.leader, t0.leader_epoch) == (2, 2)
        assert t1 is not None and t1.leader == BROKER_ID
    elif api_key == UM:
        snapshot = broker.metadata_cache.snapshot
        assert set(snapshot.brokers) == {1, 2, 3}
        assert sorted(snapshot.topics["t"]) == [0, 1]
    else:
        assert broker.partition("t", 0) is None
    assert broker.replica_manager.controller_epoch == 2


STALE_RESPONSES: dict[ApiKey, dict[str, Any]] = {
    LAI: {
        "error_code": ErrorCode.STALE_BROKER_EPOCH,
        "partition_errors": [
            {"topic_name": "t", "partition_index": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH},
            {"topic_name": "t", "partition_index": 1, "error_code": ErrorCode.STALE_BROKER_EPOCH},
        ],
    },
    UM: {"error_code": ErrorCode.STALE_BROKER_EPOCH},
    SR: {"error_code": ErrorCode.STALE_BROKER_EPOCH, "partition_errors": []},
}


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
def test_older_broker_epoch_is_rejected_and_changes_nothing(
    broker: Broker, versions: Mapping[ApiKey, int], api_key: ApiKey
) -> None:
    prepare(broker, versions)
    before = broker.state()
    response = send(
        broker, api_key, versions[api_key], changing_request(api_key, versions[api_key], EPOCH - 1)
    )
    assert response == STALE_RESPONSES[api_key]
    assert broker.state() == before
    assert broker.replica_manager.controller_epoch == 1, "the stale request's controller epoch is not adopted"


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
def test_max_broker_epoch_minus_one_is_no_exception(broker: Broker, api_key: ApiKey) -> None:
    """-1 means "unknown" only in KIP-380's per-broker field; as a maximum it is just older."""
    versions = MODES["max-epoch"]
    prepare(broker, versions)
    before = broker.state()
    response = send(broker, api_key, versions[api_key], changing_request(api_key, versions[api_key], -1))
    assert response == STALE_RESPONSES[api_key]
    assert broker.state() == before


def assert_applies(
    broker: Broker, versions: Mapping[ApiKey, int], api_key: ApiKey, request_epoch: int
) -> None:
    prepare(broker, versions)
    response = send(
        broker, api_key, versions[api_key], changing_request(api_key, versions[api_key], request_epoch)
    )
    assert response["error_code"] == ErrorCode.NONE
    if "partition_errors" in response:
        assert set(partition_errors(response).values()) == {ErrorCode.NONE}
    assert_applied(broker, api_key)


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
@pytest.mark.parametrize("request_epoch", [EPOCH, EPOCH + 1], ids=["equal", "newer"])
def test_current_or_newer_broker_epoch_is_applied(
    broker: Broker, versions: Mapping[ApiKey, int], api_key: ApiKey, request_epoch: int
) -> None:
    assert_applies(broker, versions, api_key, request_epoch)


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
def test_unknown_per_broker_epoch_is_applied(broker: Broker, api_key: ApiKey) -> None:
    """-1 in KIP-380's field: a controller from before KIP-380, accepted as Kafka does."""
    assert_applies(broker, MODES["per-broker"], api_key, -1)


def test_a_new_registration_makes_the_previous_epoch_stale(
    broker: Broker, versions: Mapping[ApiKey, int]
) -> None:
    """The same request is accepted before a re-registration and rejected after it (KIP-380)."""
    body = update_metadata(versions[UM], EPOCH)
    assert send(broker, UM, versions[UM], body) == {"error_code": ErrorCode.NONE}
    broker.identity.epoch = EPOCH + 5
    assert send(broker, UM, versions[UM], body) == {"error_code": ErrorCode.STALE_BROKER_EPOCH}


# ---------------------------------------------------------------- controller epoch


STALE_CONTROLLER_RESPONSES: dict[ApiKey, dict[str, Any]] = {
    LAI: {
        "error_code": ErrorCode.STALE_CONTROLLER_EPOCH,
        "partition_errors": [
            {"topic_name": "t", "partition_index": 0, "error_code": ErrorCode.STALE_CONTROLLER_EPOCH},
            {"topic_name": "t", "partition_index": 1, "error_code": ErrorCode.STALE_CONTROLLER_EPOCH},
        ],
    },
    UM: {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH},
    SR: {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []},
}


def older_controller_request(api_key: ApiKey, version: int) -> dict[str, Any]:
    """A request from controller epoch 4 (with a valid broker epoch) that would change the state."""
    if api_key == LAI:
        states = [lai_partition(0, leader_epoch=9, controller_epoch=4), lai_partition(1, controller_epoch=4)]
        return leader_and_isr(version, EPOCH, {"t": states}, controller_epoch=4)
    if api_key == UM:
        return update_metadata(version, EPOCH, {"u": [um_partition(0)]}, controller_epoch=4, live=(3,))
    return stop_replica(version, EPOCH, delete=True, controller_epoch=4)


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
def test_older_controller_epoch_is_rejected_and_changes_nothing(
    broker: Broker, versions: Mapping[ApiKey, int], api_key: ApiKey
) -> None:
    body = leader_and_isr(
        versions[LAI], EPOCH, {"t": [lai_partition(0, controller_epoch=5)]}, controller_epoch=5
    )
    assert send(broker, LAI, versions[LAI], body)["error_code"] == ErrorCode.NONE
    cached = update_metadata(versions[UM], EPOCH, controller_epoch=5)
    assert send(broker, UM, versions[UM], cached) == {"error_code": ErrorCode.NONE}
    before = broker.state()
    response = send(broker, api_key, versions[api_key], older_controller_request(api_key, versions[api_key]))
    assert response == STALE_CONTROLLER_RESPONSES[api_key]
    assert broker.state() == before
    assert broker.replica_manager.controller_epoch == 5


# ---------------------------------------------------------------- LeaderAndIsr per partition


@pytest.mark.parametrize("leader_epoch", [5, 4], ids=["equal", "lower"])
def test_leader_epoch_not_newer_is_refused_for_that_partition_only(broker: Broker, leader_epoch: int) -> None:
    send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": [lai_partition(0, leader_epoch=5)]}))
    states = [lai_partition(0, leader=2, leader_epoch=leader_epoch), lai_partition(1, leader_epoch=1)]
    response = send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": states}))
    assert response["error_code"] == ErrorCode.NONE
    assert partition_errors(response) == {
        ("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH,
        ("t", 1): ErrorCode.NONE,
    }
    t0 = broker.partition("t", 0)
    assert (t0.leader, t0.leader_epoch) == (BROKER_ID, 5)
    assert broker.partition("t", 1) is not None


def test_partition_without_this_broker_in_its_replicas_is_unknown(broker: Broker) -> None:
    states = [lai_partition(0, leader=2, replicas=(2, 3)), lai_partition(1)]
    response = send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": states}))
    assert partition_errors(response) == {
        ("t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 1): ErrorCode.NONE,
    }
    assert broker.partition("t", 0) is None
    assert broker.replica_manager.partition_count() == 1


def test_become_leader_then_follower(broker: Broker) -> None:
    as_leader = lai_partition(0, leader=BROKER_ID, replicas=(1, 2), isr=(1,))
    send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": [as_leader]}))
    assert broker.replica_manager.leader_count() == 1
    assert broker.replica_manager.under_replicated_count() == 1
    event = broker.last("become_leader", "become_follower")
    assert (event["kind"], event["topic"], event["partition"], event["was_leader"]) == (
        "become_leader",
        "t",
        0,
        False,
    )

    send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": [lai_partition(0, leader=2, leader_epoch=2)]}))
    assert broker.replica_manager.leader_count() == 0
    assert broker.replica_manager.under_replicated_count() == 0
    event = broker.last("become_leader", "become_follower")
    assert (event["kind"], event["leader"], event["leader_epoch"], event["was_leader"]) == (
        "become_follower",
        2,
        2,
        True,
    )
    t0 = broker.partition("t", 0)
    assert (t0.replicas, t0.isr, t0.partition_epoch) == ((1, 2), (1, 2), 12)


def test_newer_leader_and_isr_clears_stopped(broker: Broker) -> None:
    send(broker, LAI, 2, leader_and_isr(2, EPOCH))
    send(broker, SR, 1, stop_replica(1, EPOCH))
    assert broker.partition("t", 0).stopped
    send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": [lai_partition(0, leader_epoch=2)]}))
    assert not broker.partition("t", 0).stopped
    assert broker.replica_manager.leader_count() == 1


# ---------------------------------------------------------------- UpdateMetadata


def test_update_metadata_replaces_brokers_and_controller(broker: Broker) -> None:
    send(broker, UM, 5, update_metadata(5, EPOCH, live=(1, 2)))
    body = update_metadata(5, EPOCH, {}, controller_id=101, live=(2, 3))
    body["live_brokers"][1]["rack"] = "rack-b"
    assert send(broker, UM, 5, body) == {"error_code": ErrorCode.NONE}
    snapshot = broker.metadata_cache.snapshot
    assert snapshot.controller_id == 101
    assert snapshot.brokers == {
        2: CachedBroker(2, {"PLAINTEXT": ("broker-2", 9092), "CONTROLLER": ("broker-2", 9093)}),
        3: CachedBroker(3, {"PLAINTEXT": ("broker-3", 9092), "CONTROLLER": ("broker-3", 9093)}, "rack-b"),
    }
    assert broker.metadata_cache.has_alive_broker(3) and not broker.metadata_cache.has_alive_broker(1)


def test_update_metadata_merges_partition_states(broker: Broker) -> None:
    send(broker, UM, 7, update_metadata(7, EPOCH, {"t": [um_partition(0), um_partition(1)]}))
    changed = {"t": [um_partition(1, leader=2, leader_epoch=3)], "u": [um_partition(0)]}
    send(broker, UM, 7, update_metadata(7, EPOCH, changed))
    snapshot = broker.metadata_cache.snapshot
    assert sorted(snapshot.topics) == ["t", "u"]
    t0, t1 = snapshot.partition(TopicPartition("t", 0)), snapshot.partition(TopicPartition("t", 1))
    assert t0 is not None and (t0.leader, t0.leader_epoch) == (1, 1)
    assert t1 is not None and (t1.leader, t1.leader_epoch, t1.zk_version) == (2, 3, 13)


def test_update_metadata_leader_minus_two_removes_the_partition(broker: Broker) -> None:
    cached = {"t": [um_partition(0), um_partition(1)], "u": [um_partition(0)]}
    send(broker, UM, 7, update_metadata(7, EPOCH, cached))
    send(broker, UM, 7, update_metadata(7, EPOCH, {"t": [um_partition(0, leader=-2)]}))
    assert sorted(broker.metadata_cache.snapshot.topics["t"]) == [1]
    send(
        broker,
        UM,
        7,
        update_metadata(7, EPOCH, {"t": [um_partition(1, leader=-2)], "u": [um_partition(0, leader=-2)]}),
    )
    assert broker.metadata_cache.snapshot.topics == {}


# ---------------------------------------------------------------- StopReplica


def test_stop_replica_without_delete_stops_the_partition(broker: Broker) -> None:
    send(broker, LAI, 2, leader_and_isr(2, EPOCH))
    assert broker.replica_manager.leader_count() == 1
    response = send(broker, SR, 1, stop_replica(1, EPOCH, {"t": [0, 7]}))
    assert response["error_code"] == ErrorCode.NONE
    assert partition_errors(response) == {("t", 0): ErrorCode.NONE, ("t", 7): ErrorCode.NONE}
    assert broker.partition("t", 0).stopped
    assert broker.replica_manager.leader_count() == 0
    assert broker.replica_manager.partition_count() == 1
    stops = [e for e in broker.events.recent if e["kind"] == "stop_replica"]
    assert [(e["partition"], e["hosted"], e["delete"]) for e in stops] == [
        (0, True, False),
        (7, False, False),
    ]


def test_stop_replica_with_delete_removes_the_partition(broker: Broker) -> None:
    send(broker, LAI, 5, leader_and_isr(5, EPOCH, {"t": [lai_partition(0), lai_partition(1)]}))
    response = send(broker, SR, 4, stop_replica(4, EPOCH, {"t": [0]}, delete=True))
    assert partition_errors(response) == {("t", 0): ErrorCode.NONE}
    assert broker.partition("t", 0) is None
    assert broker.replica_manager.partition_count() == 1


# ---------------------------------------------------------------- KAFKA-7235: high-watermark checkpoints


LOADED = {TopicPartition("t", 0): 42, TopicPartition("t", 1): 7}


@pytest.fixture
def restarted(tmp_path: Path) -> Broker:
    """A broker whose log dir holds the logs and the checkpoint of an earlier run (logs end at 50)."""
    for tp in LOADED:
        written = Log.open(tmp_path / f"{tp.topic}-{tp.partition}", LogConfig())
        written.append_as_leader(batch(50), leader_epoch=0)
        written.close()
    write_offsets(tmp_path / HW_CHECKPOINT_FILE, LOADED)
    return make_broker(tmp_path)


def checkpoint_bytes(broker: Broker) -> bytes:
    return (broker.log_dir / HW_CHECKPOINT_FILE).read_bytes()


def test_nothing_is_checkpointed_before_the_first_leader_and_isr(restarted: Broker) -> None:
    original = checkpoint_bytes(restarted)
    assert restarted.replica_manager.checkpoint_high_watermarks() is False
    send(restarted, UM, 5, update_metadata(5, EPOCH))
    send(restarted, SR, 1, stop_replica(1, EPOCH))
    assert restarted.replica_manager.checkpoint_high_watermarks() is False
    assert checkpoint_bytes(restarted) == original


def test_rejected_leader_and_isr_does_not_start_checkpoints(
    restarted: Broker, versions: Mapping[ApiKey, int]
) -> None:
    original = checkpoint_bytes(restarted)
    version = versions[LAI]
    stale_broker = leader_and_isr(
        version, EPOCH - 1, {"t": [lai_partition(0), lai_partition(1)]}, controller_epoch=3
    )
    assert send(restarted, LAI, version, stale_broker)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert restarted.replica_manager.checkpoint_high_watermarks() is False
    restarted.replica_manager.accept_controller_epoch(3)
    stale_controller = leader_and_isr(version, EPOCH, {"t": [lai_partition(0)]}, controller_epoch=2)
    assert send(restarted, LAI, version, stale_controller)["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert restarted.replica_manager.checkpoint_high_watermarks() is False
    assert checkpoint_bytes(restarted) == original
    assert not any(e["kind"] == "checkpoint_written" for e in restarted.events.recent)


def test_valid_leader_and_isr_starts_checkpoints_keeping_loaded_high_watermarks(
    restarted: Broker, versions: Mapping[ApiKey, int]
) -> None:
    version = versions[LAI]
    body = leader_and_isr(version, EPOCH, {"t": [lai_partition(0), lai_partition(1, leader=2)]})
    assert send(restarted, LAI, version, body)["error_code"] == ErrorCode.NONE
    assert (restarted.partition("t", 0).high_watermark, restarted.partition("t", 1).high_watermark) == (42, 7)
    assert restarted.replica_manager.checkpoint_high_watermarks() is True
    assert read_offsets(restarted.log_dir / HW_CHECKPOINT_FILE) == LOADED
    restarted.partition("t", 0).high_watermark = 50
    assert restarted.replica_manager.checkpoint_high_watermarks() is True
    assert read_offsets(restarted.log_dir / HW_CHECKPOINT_FILE) == {**LOADED, TopicPartition("t", 0): 50}
    assert not list(restarted.log_dir.glob("*.tmp"))


def test_corrupt_checkpoint_is_ignored_at_start(tmp_path: Path) -> None:
    """A damaged file must not stop the broker; partitions then start from high watermark 0."""
    (tmp_path / HW_CHECKPOINT_FILE).write_text("0\n5\nt 0 42\n")
    broker = make_broker(tmp_path)
    send(broker, LAI, 2, leader_and_isr(2, EPOCH))
    assert broker.partition("t", 0).high_watermark == 0


# ---------------------------------------------------------------- event log


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("api_key", CONTROL, ids=lambda k: k.name)
def test_control_requests_are_logged_with_epochs_errors_and_times(
    tmp_path: Path, versions: Mapping[ApiKey, int], api_key: ApiKey
) -> None:
    path = tmp_path / "events.jsonl"
    broker = make_broker(tmp_path, event_file=path)
    version = versions[api_key]
    field = epoch_field(api_key, version)
    send(
        broker,
        api_key,
        version,
        changing_request(api_key, version, EPOCH - 1),
        correlation_id=31,
        queued_s=0.25,
    )
    send(broker, api_key, version, changing_request(api_key, version, EPOCH), correlation_id=32)
    broker.events.close()
    control = [e for e in read_events(path) if e["kind"].startswith("control_request_")]
    assert [(e["kind"], e["correlation_id"]) for e in control] == [
        ("control_request_received", 31),
        ("control_request_handled", 31),
        ("control_request_received", 32),
        ("control_request_handled", 32),
    ]
    received, stale, _, accepted = control
    api_name = {LAI: "LeaderAndIsr", UM: "UpdateMetadata", SR: "StopReplica"}[api_key]
    for event in control:
        assert event["node"] == "broker-1"
        assert (event["api"], event["api_version"]) == (api_name, version)
        assert (event["controller_id"], event["controller_epoch"]) == (CONTROLLER_ID, 2)
        assert event["broker_epoch_now"] == EPOCH
        assert event["queue_ms"] >= 0
    assert received["listener"] == "CONTROLLER"
    assert received[field] == stale[field] == EPOCH - 1
    assert received["queue_ms"] == stale["queue_ms"] == 250.0
    assert stale["error"] == "STALE_BROKER_EPOCH"
    assert stale["partition_errors"] == (2 if api_key == LAI else 0)
    assert stale["handle_ms"] >= 0
    assert (accepted["error"], accepted["partition_errors"], accepted[field]) == ("NONE", 0, EPOCH)


def test_partition_errors_are_counted_in_the_handled_event(broker: Broker) -> None:
    states = [lai_partition(0, replicas=(2, 3), leader=2), lai_partition(1)]
    send(broker, LAI, 2, leader_and_isr(2, EPOCH, {"t": states}))
    handled = [e for e in broker.events.recent if e["kind"] == "control_request_handled"]
    assert (handled[-1]["error"], handled[-1]["partition_errors"]) == ("NONE", 1)


# ---------------------------------------------------------------- dispatch


def test_on_handled_sees_the_top_level_error(broker: Broker) -> None:
    seen: list[tuple[int, int]] = []
    broker.apis.on_handled = lambda request, error: seen.append((request.header.correlation_id, error))
    send(broker, UM, 5, update_metadata(5, EPOCH - 1), correlation_id=8)
    send(broker, UM, 5, update_metadata(5, EPOCH), correlation_id=9)
    assert seen == [(8, ErrorCode.STALE_BROKER_EPOCH), (9, ErrorCode.NONE)]


def test_api_without_a_handler_closes_the_connection(broker: Broker) -> None:
    request = as_request(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 1, "broker_epoch": EPOCH})
    assert isinstance(broker.apis.handle(request), Close)
    # SASL's requests are served too: past authentication they get ILLEGAL_SASL_STATE, as in Kafka
    assert broker.apis.api_keys == frozenset(CONTROL) | {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


def test_sasl_requests_after_authentication_are_an_illegal_state(broker: Broker) -> None:
    answer = send(broker, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_registered_handler_serves_its_api(broker: Broker) -> None:
    broker.apis.register(
        ApiKey.CONTROLLED_SHUTDOWN, lambda request, body: {"error_code": 0, "remaining_partitions": []}
    )
    answer = send(broker, ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 1, "broker_epoch": EPOCH})
    assert answer == {"error_code": 0, "remaining_partitions": []}
    assert not any(e["kind"].startswith("control_request_") for e in broker.events.recent)


def test_malformed_body_closes_the_connection_and_changes_nothing(broker: Broker) -> None:
    frame = encode_request(LAI, 2, 1, "c", leader_and_isr(2, EPOCH))[:-6]
    frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    header, offset = decode_request_header(frame)
    now = time.monotonic()
    request = Request(header, frame, offset, "CONTROLLER", "127.0.0.1:1", now, NO_FUTURE, dequeued_at=now)
    before = broker.state()
    assert isinstance(broker.apis.handle(request), Close)
    assert broker.state() == before
    assert broker.events.recent == []
