"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch on one broker, through its request handling.

Requests are encoded and responses decoded with the wire codec, as a client would; the partition's
leadership comes from a real LeaderAndIsr, its log is a real log in a temporary directory. Followers
are played by sending follower fetches (``replica_id`` 2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from broker.alter_partition_manager import Outcome, Proposal
from broker.apis import BrokerIdentity, KafkaApis
from broker.fetch import FetchApi
from broker.metadata_cache import MetadataCache
from broker.offsets_api import OffsetsApi
from broker.produce import ProduceApi
from broker.replica_manager import ReplicaManager
from broker.request_channel import Close, Request, Result
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode, decode_request_header, decode_response, encode_request
from protocol.record_batch import build_batch, parse_batches
from tests.broker.network_builders import channel, serving
from tests.support.raw_client import RawClient
from tests.support.requests import lai_partition, leader_and_isr, live_broker
from zkstore.znodes import TopicPartition

EPOCH = 1000
TP = TopicPartition("t", 0)
WAIT_S = 10.0
LATE_S = 2.0
"""How late past its max wait a long poll may be answered on a loaded machine (the bug was 29 s)."""
NO_FUTURE = cast("asyncio.Future[Result]", None)


@dataclass
class DataBroker:
    apis: KafkaApis
    rm: ReplicaManager
    cache: MetadataCache

    def raw(self, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        frame = encode_request(api, version, 7, "client", body)
        header, offset = decode_request_header(frame)
        request = Request(header, frame, offset, "PLAINTEXT", "127.0.0.1:1", time.monotonic(), NO_FUTURE)
        request.dequeued_at = time.monotonic()
        return self.apis.handle(request)

    def call(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        result = self.raw(api, version, body)
        if isinstance(result, Future):
            result = result.result(WAIT_S)
        assert isinstance(result, bytes), result
        return decode_response(api, version, result)[1]

    def later(self, api: ApiKey, version: int, body: dict[str, Any]) -> Future[Any]:
        result = self.raw(api, version, body)
        assert isinstance(result, Future), "expected the request to wait"
        return result

    def partition(self) -> Any:
        return self.rm.partitions[TP]


def make(tmp_path: Path, *, isr: tuple[int, ...] = (1,), leader: int = 1, min_isr: int = 1) -> DataBroker:
    events = EventLog(None, "broker-1")
    cache = MetadataCache()
    rm = ReplicaManager(1, tmp_path, events, metadata_cache=cache)
    apis = KafkaApis(BrokerIdentity(1, EPOCH), rm, cache, events)
    offsets = OffsetsApi(rm)
    rm.min_insync_replicas = min_isr
    apis.register(ApiKey.PRODUCE, ProduceApi(rm).handle)
    apis.register(ApiKey.FETCH, FetchApi(rm).handle)
    apis.register(ApiKey.LIST_OFFSETS, offsets.list_offsets)
    apis.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, offsets.offset_for_leader_epoch)
    broker = DataBroker(apis, rm, cache)
    state = lai_partition(0, leader=leader, leader_epoch=5, replicas=(1, 2), isr=isr)
    assert broker.call(ApiKey.LEADER_AND_ISR, 2, leader_and_isr(2, EPOCH, {"t": [state]}))["error_code"] == 0
    cache.update({"controller_id": 100, "topic_states": [], "live_brokers": [live_broker(1), live_broker(2)]})
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataBroker]:
    b = make(tmp_path)
    yield b
    b.rm.shutdown()


def records(count: int, start: int = 0) -> bytes:
    return build_batch(
        [(None, f"v{i}".encode()) for i in range(start, start + count)],
        0,
        timestamps=[1000 + i for i in range(start, start + count)],
    )


def produce_body(
    data: bytes | None, acks: int = 1, timeout_ms: int = 5000, topic: str = "t", partition: int = 0
) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}],
    }


def produce_answer(response: dict[str, Any]) -> dict[str, Any]:
    return response["responses"][0]["partition_responses"][0]


def fetch_body(
    offset: int,
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    epoch: int = -1,
    topic: str = "t",
) -> dict[str, Any]:
    return {
        "replica_id": replica_id,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": epoch,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fetch_answer(response: dict[str, Any]) -> dict[str, Any]:
    return response["responses"][0]["partitions"][0]


def values(data: bytes | None) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h, _, _ in parse_batches(data or b"")]


# ---------------------------------------------------------------- produce and consume


def test_produce_assigns_offsets_and_a_consumer_reads_them_back(broker: DataBroker) -> None:
    first = produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(records(3))))
    second = produce_answer(broker.call(ApiKey.PRODUCE, 3, produce_body(records(2, 3))))
    assert (first["error_code"], first["base_offset"], first["log_start_offset"]) == (0, 0, 0)
    assert (second["error_code"], second["base_offset"]) == (0, 3)
    answer = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0)))
    assert answer["error_code"] == 0 and answer["high_watermark"] == 5 and answer["last_stable_offset"] == 5
    assert values(answer["records"]) == [(0, 2), (3, 4)]
    assert values(fetch_answer(broker.call(ApiKey.FETCH, 4, fetch_body(4)))["records"]) == [(3, 4)]


def test_a_consumer_sees_only_what_the_isr_has(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    try:
        assert produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(records(3))))["error_code"] == 0
        answer = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0)))
        assert answer["high_watermark"] == 0 and not answer["records"], "follower 2 has nothing yet"
        follower = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0, replica_id=2)))
        assert values(follower["records"]) == [(0, 2)], "a follower reads up to the log end"
        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))  # follower 2 now holds offsets 0-2
        assert fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0)))["high_watermark"] == 3
    finally:
        broker.rm.shutdown()


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    try:
        waiting = broker.later(ApiKey.PRODUCE, 8, produce_body(records(3), acks=-1))
        assert not waiting.done()
        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))
        answer = produce_answer(decode_response(ApiKey.PRODUCE, 8, waiting.result(WAIT_S))[1])
        assert (answer["error_code"], answer["base_offset"]) == (0, 0)
    finally:
        broker.rm.shutdown()


def test_acks_all_times_out_without_losing_the_appended_records(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    try:
        answer = produce_answer(
            broker.call(ApiKey.PRODUCE, 8, produce_body(records(3), acks=-1, timeout_ms=50))
        )
        assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
        assert broker.partition().log.log_end_offset == 3
    finally:
        broker.rm.shutdown()


def test_acks_all_refused_when_the_isr_is_below_the_minimum(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1,), min_isr=2)
    try:
        answer = produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(records(3), acks=-1)))
        assert answer["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        assert broker.partition().log.log_end_offset == 0, "nothing appended"
        assert (
            produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(records(3), acks=1)))["error_code"]
            == 0
        )
    finally:
        broker.rm.shutdown()


def test_acks_all_after_the_isr_shrank_below_the_minimum(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2), min_isr=2)
    try:
        waiting = broker.later(ApiKey.PRODUCE, 8, produce_body(records(3), acks=-1))
        partition = broker.partition()
        with partition.lock:
            partition.isr = (1,)
            partition.maybe_advance_high_watermark()
        broker.rm.partition_changed(TP)
        answer = produce_answer(decode_response(ApiKey.PRODUCE, 8, waiting.result(WAIT_S))[1])
        assert answer["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    finally:
        broker.rm.shutdown()


def test_acks_zero_has_no_response_and_a_failure_closes_the_connection(broker: DataBroker) -> None:
    assert broker.raw(ApiKey.PRODUCE, 8, produce_body(records(2), acks=0)) is None
    assert broker.partition().log.log_end_offset == 2
    closed = broker.raw(ApiKey.PRODUCE, 8, produce_body(records(2), acks=0, topic="nope"))
    assert isinstance(closed, Close) and "UNKNOWN_TOPIC_OR_PARTITION" in closed.reason


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (produce_body(records(1), acks=2), ErrorCode.INVALID_REQUIRED_ACKS),
        (produce_body(records(1), topic="nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (produce_body(b"\x00" * 70), ErrorCode.CORRUPT_MESSAGE),
        (produce_body(None), ErrorCode.CORRUPT_MESSAGE),
    ],
    ids=["bad acks", "unknown topic", "garbage", "no records"],
)
def test_produce_errors(broker: DataBroker, body: dict[str, Any], error: ErrorCode) -> None:
    assert produce_answer(broker.call(ApiKey.PRODUCE, 8, body))["error_code"] == error
    assert broker.partition().log.log_end_offset == 0


def test_a_batch_whose_crc_does_not_match_is_corrupt(broker: DataBroker) -> None:
    damaged = bytearray(records(3))
    damaged[-1] ^= 0xFF
    answer = produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(bytes(damaged))))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE and answer["error_message"]
    assert broker.partition().log.log_end_offset == 0


def test_a_batch_above_message_max_bytes_is_too_large(tmp_path: Path) -> None:
    broker = make(tmp_path)
    try:
        big = build_batch([(None, bytes(2_000_000))], 0)
        answer = produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(big)))
        assert answer["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    finally:
        broker.rm.shutdown()


def test_a_follower_or_an_unhosted_partition_is_not_the_leader(tmp_path: Path) -> None:
    broker = make(tmp_path, leader=2)
    try:
        assert (
            produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(records(1))))["error_code"]
            == ErrorCode.NOT_LEADER_OR_FOLLOWER
        )
        assert (
            fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0)))["error_code"]
            == ErrorCode.NOT_LEADER_OR_FOLLOWER
        )
        state = {
            "partition_index": 1,
            "controller_epoch": 1,
            "leader": 2,
            "leader_epoch": 1,
            "isr": [2],
            "zk_version": 0,
            "replicas": [2],
            "offline_replicas": [],
        }
        broker.cache.update(
            {
                "controller_id": 100,
                "topic_states": [{"topic_name": "t", "partition_states": [state]}],
                "live_brokers": [live_broker(1), live_broker(2)],
            }
        )
        unhosted = produce_body(records(1), partition=1)
        assert (
            produce_answer(broker.call(ApiKey.PRODUCE, 8, unhosted))["error_code"]
            == ErrorCode.NOT_LEADER_OR_FOLLOWER
        )
    finally:
        broker.rm.shutdown()


# ---------------------------------------------------------------- fetch


@pytest.mark.parametrize(
    ("epoch", "error"),
    [(4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH), (5, ErrorCode.NONE)],
)
def test_fetch_checks_the_clients_leader_epoch(broker: DataBroker, epoch: int, error: ErrorCode) -> None:
    assert fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0, epoch=epoch)))["error_code"] == error


def test_fetch_beyond_the_log_end_is_out_of_range(broker: DataBroker) -> None:
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))
    assert (
        fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(4)))["error_code"]
        == ErrorCode.OFFSET_OUT_OF_RANGE
    )
    assert fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(3)))["error_code"] == ErrorCode.NONE


def test_a_follower_fetch_out_of_range_does_not_count_as_its_position(tmp_path: Path) -> None:
    """A follower whose log runs past ours (it diverged) holds nothing we can count: Kafka records a
    follower's position only once its fetch offset is validated."""
    broker = make(tmp_path, isr=(1, 2))
    try:
        broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))
        answer = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(5, replica_id=2)))
        assert answer["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0)))["high_watermark"] == 0
    finally:
        broker.rm.shutdown()


def test_a_long_poll_is_answered_when_records_arrive(broker: DataBroker) -> None:
    waiting = broker.later(ApiKey.FETCH, 11, fetch_body(0, max_wait_ms=10_000))
    assert not waiting.done()
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(2)))
    answer = fetch_answer(decode_response(ApiKey.FETCH, 11, waiting.result(WAIT_S))[1])
    assert values(answer["records"]) == [(0, 1)]


def test_a_long_poll_with_min_bytes_waits_until_enough_arrived_and_answers_all_of_it(
    broker: DataBroker,
) -> None:
    one_batch = len(records(1))
    waiting = broker.later(ApiKey.FETCH, 11, fetch_body(0, max_wait_ms=10_000, min_bytes=one_batch + 1))
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(1)))
    assert not waiting.done(), "one batch is fewer bytes than min_bytes"
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(1, start=1)))
    answer = fetch_answer(decode_response(ApiKey.FETCH, 11, waiting.result(WAIT_S))[1])
    assert values(answer["records"]) == [(0, 0), (1, 1)]


def test_a_long_poll_ends_empty_after_max_wait(broker: DataBroker) -> None:
    started = time.monotonic()
    answer = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(0, max_wait_ms=50)))
    assert answer["error_code"] == 0 and not answer["records"]
    assert time.monotonic() - started >= 0.04


async def test_a_followers_long_polls_over_a_socket_are_answered_within_their_max_wait(
    tmp_path: Path,
) -> None:
    """The interop sequence without Kafka: Kafka 3.9's fetcher at IBP 2.2 long-polls (Fetch v10,
    max wait 500 ms) on one connection a new leader that has nothing yet, then an acks=all produce
    comes on another. Every poll is answered within about its max wait, a waiting one as soon as the
    records arrive, and the produce once the follower has fetched past them."""
    broker = make(tmp_path, isr=(1, 2))
    plane = channel(broker.apis.handle, capacity=500, threads=8)
    unsupported = broker.apis.unsupported_version_response
    try:
        async with serving(plane, unsupported=unsupported, max_waiting=16) as listener:
            follower = await RawClient.connect(listener.port)
            producer = await RawClient.connect(listener.port)

            def poll(correlation_id: int, offset: int, max_wait_ms: int = 500) -> bytes:
                body = fetch_body(offset, replica_id=2, max_wait_ms=max_wait_ms, epoch=5)
                return encode_request(ApiKey.FETCH, 10, correlation_id, "broker-2-fetcher-0", body)

            async def answered(correlation_id: int, sent: float) -> tuple[float, dict[str, Any]]:
                got, response = await follower.read_answer(ApiKey.FETCH, 10)
                assert got == correlation_id
                return time.monotonic() - sent, fetch_answer(response)

            for correlation_id in (0, 1):  # nothing to read yet: each poll ends empty at its max wait
                sent = time.monotonic()
                await follower.send(poll(correlation_id, 0))
                took, answer = await answered(correlation_id, sent)
                assert answer["error_code"] == 0 and not answer["records"]
                assert 0.45 <= took < 0.5 + LATE_S, f"poll {correlation_id} answered after {took:.3f} s"

            sent = time.monotonic()
            await follower.send(poll(2, 0, max_wait_ms=5000))
            await asyncio.sleep(0.1)
            acks_all = produce_body(records(3), acks=-1)
            await producer.send(encode_request(ApiKey.PRODUCE, 8, 7, "producer", acks_all))
            took, answer = await answered(2, sent)
            assert values(answer["records"]) == [(0, 2)] and took < 0.1 + LATE_S, "the records end the wait"

            sent = time.monotonic()
            await follower.send(poll(3, 3))  # the follower holds offsets 0-2: the produce is committed
            got, produced = await producer.read_answer(ApiKey.PRODUCE, 8)
            assert (got, produce_answer(produced)["error_code"]) == (7, ErrorCode.NONE)
            took, answer = await answered(3, sent)
            assert answer["high_watermark"] == 3 and took < 0.5 + LATE_S
            follower.close()
            producer.close()
    finally:
        broker.rm.shutdown()


# ---------------------------------------------------------------- offsets


def list_offsets_body(timestamp: int, version: int) -> dict[str, Any]:
    partition: dict[str, Any] = {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [partition]}]}


@pytest.mark.parametrize("version", [1, 5])
def test_list_offsets_earliest_latest_and_by_time(broker: DataBroker, version: int) -> None:
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(3, 3)))

    def offset(timestamp: int) -> dict[str, Any]:
        return broker.call(ApiKey.LIST_OFFSETS, version, list_offsets_body(timestamp, version))["topics"][0][
            "partitions"
        ][0]

    assert offset(-2)["offset"] == 0
    latest = offset(-1)
    assert latest["offset"] == 6
    if version >= 4:
        assert latest["leader_epoch"] == 5
    by_time = offset(1004)
    assert (by_time["offset"], by_time["timestamp"]) == (4, 1004)
    assert offset(99_999)["offset"] == -1


def test_offset_for_leader_epoch_gives_where_an_epoch_ended(broker: DataBroker) -> None:
    broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))

    def end(epoch: int, version: int = 3) -> tuple[int, int, int]:
        body = {
            "replica_id": 2,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": epoch}],
                }
            ],
        }
        p = broker.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)["topics"][0]["partitions"][0]
        return p["error_code"], p["leader_epoch"], p["end_offset"]

    assert end(5) == (0, 5, 3), "the current epoch ends at the log end"
    assert end(3) == (0, 3, 0), "an earlier epoch ends where the next one starts"
    assert end(7) == (0, -1, -1)


# ---------------------------------------------------------------- ISR changes (KIP-841 on the leader)


def test_a_caught_up_live_follower_is_proposed_and_a_refusal_reverts(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1,))
    proposals: list[Proposal] = []
    broker.rm.propose_isr = proposals.append
    try:
        broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))
        broker.call(ApiKey.FETCH, 11, fetch_body(0, replica_id=2))
        assert proposals == [], "behind the high watermark: not yet"
        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))
        assert [p.new_isr for p in proposals] == [(1, 2)]
        assert broker.partition().pending_isr == (1, 2) and broker.partition().isr == (1,)
        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))
        assert len(proposals) == 1, "one proposal at a time"

        broker.rm.isr_outcome(Outcome(proposals[0], ErrorCode.INELIGIBLE_REPLICA))
        assert broker.partition().pending_isr is None and broker.partition().isr == (1,)
        refused = broker.rm.events.recent[-1]
        assert refused["kind"] == "isr_change_refused" and refused["error"] == "INELIGIBLE_REPLICA"

        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))
        assert len(proposals) == 2, "tried again later"
        broker.rm.isr_outcome(Outcome(proposals[1], ErrorCode.NONE, (1, 2), 5, 20))
        assert broker.partition().isr == (1, 2) and broker.partition().partition_epoch == 20
    finally:
        broker.rm.shutdown()


def test_a_follower_missing_from_the_metadata_cache_is_not_proposed(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1,))
    proposals: list[Proposal] = []
    broker.rm.propose_isr = proposals.append
    broker.cache.update({"controller_id": 100, "topic_states": [], "live_brokers": [live_broker(1)]})
    try:
        broker.call(ApiKey.PRODUCE, 8, produce_body(records(3)))
        broker.call(ApiKey.FETCH, 11, fetch_body(3, replica_id=2))
        assert proposals == [], "broker 2 is not alive (fenced): never proposed"
    finally:
        broker.rm.shutdown()


def test_a_lagging_follower_is_proposed_for_removal(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    proposals: list[Proposal] = []
    broker.rm.propose_isr = proposals.append
    try:
        assert broker.rm.shrink_isrs(max_lag_ms=60_000) == 0
        partition = broker.partition()
        with partition.lock:
            partition.followers[2].last_caught_up_ms -= 120_000
        assert broker.rm.shrink_isrs(max_lag_ms=60_000) == 1
        assert [p.new_isr for p in proposals] == [(1,)]
        assert partition.isr == (1, 2), "the shrink counts only once committed"
    finally:
        broker.rm.shutdown()
