"""Fetch v12-v17 served as Apache Kafka 3.9's replica fetchers send it (v17 at IBP 3.9).

Topics by id, the follower in ``replica_state``, and ``last_fetched_epoch`` answered with
``diverging_epoch`` where the follower's log diverges (KIP-595's truncation on fetch), on a leader
whose partition came from a LeaderAndIsr v7. Clients are still offered v4-v11."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import ADVERTISED_MAX_VERSIONS, BrokerIdentity, KafkaApis, api_versions_entries
from broker.fetch import FetchApi
from broker.fetch_versions import FlexibleFetch
from broker.metadata_cache import MetadataCache
from broker.produce import ProduceApi
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request, Result
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode, WireDialect, decode_request_header, decode_response, encode_request
from protocol.record_batch import build_batch, parse_batches
from tests.support.requests import lai_partition, leader_and_isr, topic_id_of, um_partition, update_metadata
from zkstore.znodes import TopicPartition

KAFKA = WireDialect.KAFKA
EPOCH = 1000
TP = TopicPartition("t", 0)
T_ID = topic_id_of("t")
WAIT_S = 10.0
NO_FUTURE = cast("asyncio.Future[Result]", None)


class Leader:
    """Broker 1 at IBP 3.9 leading t-0 (replicas 1 and 2) from a LeaderAndIsr v7."""

    def __init__(self, log_dir: Path) -> None:
        events = EventLog(None, "broker-1")
        self.cache = MetadataCache()
        self.rm = ReplicaManager(1, log_dir, events, metadata_cache=self.cache)
        self.apis = KafkaApis(BrokerIdentity(1, EPOCH), self.rm, self.cache, events, dialect=KAFKA)
        self.apis.register(ApiKey.PRODUCE, ProduceApi(self.rm).handle)
        self.apis.register(ApiKey.FETCH, FlexibleFetch(FetchApi(self.rm), self.rm, self.cache).handle)
        self.lead(leader_epoch=1)
        metadata = update_metadata(8, EPOCH, {"t": [um_partition(0)]}, dialect=KAFKA)
        assert self.call(ApiKey.UPDATE_METADATA, 8, metadata) == {"error_code": 0}

    def lead(self, leader_epoch: int) -> None:
        state = lai_partition(0, leader_epoch=leader_epoch, replicas=(1, 2), isr=(1,))
        body = leader_and_isr(7, EPOCH, {"t": [state]}, dialect=KAFKA)
        assert self.call(ApiKey.LEADER_AND_ISR, 7, body)["error_code"] == 0

    def raw(self, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        frame = encode_request(api, version, 7, "broker-2-fetcher-0", body, dialect=KAFKA)
        header, offset = decode_request_header(frame, dialect=KAFKA)
        now = time.monotonic()
        request = Request(header, frame, offset, "PLAINTEXT", "127.0.0.1:1", now, NO_FUTURE, dequeued_at=now)
        return self.apis.handle(request)

    def call(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        result = self.raw(api, version, body)
        if isinstance(result, Future):
            result = result.result(WAIT_S)
        assert isinstance(result, bytes), result
        return decode_response(api, version, result, dialect=KAFKA)[1]

    def produce(self, count: int, start: int) -> None:
        batch = build_batch([(None, f"v{i}".encode()) for i in range(start, start + count)], 0)
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
        }
        answer = self.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 0


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    broker = Leader(tmp_path)
    yield broker
    broker.rm.shutdown()


def follower_fetch(
    version: int,
    offset: int,
    *,
    last_fetched_epoch: int = -1,
    topic: Any = T_ID,
    replica_id: int = 2,
    max_wait_ms: int = 0,
) -> dict[str, Any]:
    """A follower's fetch of t-0 as Kafka 3.9 writes it (v15+: the id in ``replica_state``)."""
    key = {"topic_id": topic} if version >= 13 else {"topic": topic}
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": last_fetched_epoch,
        "log_start_offset": 0,
        "partition_max_bytes": 1 << 20,
        "replica_directory_id": uuid.UUID(int=0),
    }
    who = {"replica_state": {"replica_id": replica_id, "replica_epoch": 77}} if version >= 15 else {}
    return {
        "cluster_id": None,
        **who,
        **({"replica_id": replica_id} if version < 15 else {}),
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{**key, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def only_partition(response: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    (topic,) = response["responses"]
    (partition,) = topic["partitions"]
    return topic.get("topic_id", topic.get("topic")), partition


def offsets(records: bytes | None) -> list[int]:
    return [header.base_offset for header, _, _ in parse_batches(records or b"")]


@pytest.mark.parametrize("version", [13, 15, 17])
def test_a_follower_fetch_by_topic_id_reads_and_moves_the_high_watermark(
    leader: Leader, version: int
) -> None:
    leader.produce(3, 0)
    key, answer = only_partition(leader.call(ApiKey.FETCH, version, follower_fetch(version, 0)))
    assert (key, answer["error_code"], offsets(answer["records"])) == (T_ID, ErrorCode.NONE, [0])
    assert answer["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    leader.call(ApiKey.FETCH, version, follower_fetch(version, 3, last_fetched_epoch=1))
    with leader.rm.partitions[TP].lock:
        assert leader.rm.partitions[TP].followers[2].log_end_offset == 3


def test_v12_names_topics_and_the_follower_as_v11_does(leader: Leader) -> None:
    leader.produce(2, 0)
    key, answer = only_partition(leader.call(ApiKey.FETCH, 12, follower_fetch(12, 0, topic="t")))
    assert (key, answer["error_code"], offsets(answer["records"])) == ("t", ErrorCode.NONE, [0])


def test_an_unknown_topic_id_is_unknown_topic_id(leader: Leader) -> None:
    other = uuid.uuid4()
    key, answer = only_partition(leader.call(ApiKey.FETCH, 17, follower_fetch(17, 0, topic=other)))
    assert (key, answer["error_code"]) == (other, ErrorCode.UNKNOWN_TOPIC_ID)


def test_an_id_the_metadata_gives_another_log_is_inconsistent(leader: Leader) -> None:
    stale = uuid.uuid4()
    metadata = update_metadata(8, EPOCH, {"t": [um_partition(0)]}, topic_ids={"t": stale}, dialect=KAFKA)
    leader.call(ApiKey.UPDATE_METADATA, 8, metadata)
    key, answer = only_partition(leader.call(ApiKey.FETCH, 17, follower_fetch(17, 0, topic=stale)))
    assert (key, answer["error_code"]) == (stale, ErrorCode.INCONSISTENT_TOPIC_ID)


def test_the_partitions_own_id_serves_a_fetch_before_the_metadata_names_it(tmp_path: Path) -> None:
    broker = Leader(tmp_path)
    try:
        broker.cache.update(
            update_metadata(8, EPOCH, {"t": [um_partition(0, leader=-2)]}, dialect=KAFKA)
        )  # forgets t and its id
        assert broker.cache.snapshot.topic_names == {}
        _, answer = only_partition(broker.call(ApiKey.FETCH, 17, follower_fetch(17, 0)))
        assert answer["error_code"] == ErrorCode.NONE
    finally:
        broker.rm.shutdown()


def test_a_follower_whose_last_epoch_diverges_is_told_where_and_reads_nothing(leader: Leader) -> None:
    """Epoch 1 wrote offsets 0-2, epoch 3 (after a leader change) offsets 3-4. A follower that
    fetched up to offset 4 in epoch 2 (a leader this one never followed) diverges after epoch 1's
    end, offset 3; one that fetched up to 3 in epoch 1 reads on."""
    leader.produce(3, 0)
    leader.lead(leader_epoch=3)
    leader.produce(2, 3)
    _, answer = only_partition(leader.call(ApiKey.FETCH, 17, follower_fetch(17, 4, last_fetched_epoch=2)))
    assert answer["diverging_epoch"] == {"epoch": 1, "end_offset": 3}
    assert (answer["error_code"], answer["records"], answer["high_watermark"]) == (ErrorCode.NONE, b"", 5)
    with leader.rm.partitions[TP].lock:
        assert leader.rm.partitions[TP].followers[2].log_end_offset == -1, "its position is not taken"
    _, on = only_partition(leader.call(ApiKey.FETCH, 17, follower_fetch(17, 3, last_fetched_epoch=1)))
    assert (on["diverging_epoch"], offsets(on["records"])) == ({"epoch": -1, "end_offset": -1}, [3])


def test_an_epoch_past_the_leaders_is_out_of_range(leader: Leader) -> None:
    leader.produce(1, 0)
    _, answer = only_partition(leader.call(ApiKey.FETCH, 17, follower_fetch(17, 1, last_fetched_epoch=9)))
    assert answer["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_waiting_v17_fetch_is_answered_in_its_layout(leader: Leader) -> None:
    waiting = leader.raw(ApiKey.FETCH, 17, follower_fetch(17, 0, max_wait_ms=10_000))
    assert isinstance(waiting, Future), "nothing to read yet: the fetch waits"
    leader.produce(1, 0)
    frame = waiting.result(WAIT_S)
    key, answer = only_partition(decode_response(ApiKey.FETCH, 17, frame, dialect=KAFKA)[1])
    assert (key, offsets(answer["records"])) == (T_ID, [0])


def test_clients_are_offered_fetch_up_to_v11() -> None:
    (entry,) = api_versions_entries([ApiKey.FETCH], KAFKA)
    assert (entry["min_version"], entry["max_version"]) == (4, ADVERTISED_MAX_VERSIONS[ApiKey.FETCH])
