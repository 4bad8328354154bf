"""Transactions through one broker's request handling: transactional produces, the coordinator's
markers (``ProduceApi.append_marker``), read_committed and read_uncommitted fetches, long polls and
ListOffsets, on a real log, encoded and decoded as a client would (``test_data_apis``'s broker)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from broker.produce import ProduceApi
from protocol import ApiKey, ErrorCode, decode_response
from protocol.record_batch import build_batch, parse_batches
from tests.broker.test_data_apis import (
    TP,
    WAIT_S,
    DataBroker,
    fetch_answer,
    fetch_body,
    list_offsets_body,
    make,
    produce_answer,
    produce_body,
    values,
)
from tests.broker.test_fetch_versions import T_ID, Leader, follower_fetch, offsets, only_partition

PID = 9001
READ_COMMITTED = 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataBroker]:
    b = make(tmp_path)
    yield b
    b.rm.shutdown()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def records(count: int) -> bytes:
    """A plain batch stamped now, like the markers: older stamps would roll a segment at the first
    marker, and one read stays in one segment."""
    return build_batch([(None, b"p")] * count, timestamps=[now_ms()] * count)


def txn_records(sequence: int, count: int = 1, *, transactional: bool = True) -> bytes:
    return build_batch(
        [(None, b"t")] * count,
        timestamps=[now_ms()] * count,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=transactional,
    )


def produce(broker: DataBroker, data: bytes) -> dict[str, Any]:
    return produce_answer(broker.call(ApiKey.PRODUCE, 8, produce_body(data)))


def marker(
    broker: DataBroker, *, commit: bool, coordinator_epoch: int = 0, epoch: int = 0
) -> Future[ErrorCode]:
    return ProduceApi(broker.rm).append_marker(TP, PID, epoch, coordinator_epoch, commit, timeout_s=WAIT_S)


def fetch(broker: DataBroker, offset: int, isolation: int, **options: Any) -> dict[str, Any]:
    body = {**fetch_body(offset, **options), "isolation_level": isolation}
    return fetch_answer(broker.call(ApiKey.FETCH, 11, body))


def test_read_committed_stops_at_the_last_stable_offset_and_gets_the_aborts(broker: DataBroker) -> None:
    produce(broker, records(1))  # 0
    assert produce(broker, txn_records(0, 2))["base_offset"] == 1  # 1-2
    produce(broker, records(1))  # 3
    uncommitted = fetch(broker, 0, 0)
    assert values(uncommitted["records"]) == [(0, 0), (1, 2), (3, 3)]
    assert (uncommitted["high_watermark"], uncommitted["last_stable_offset"]) == (4, 1)
    assert uncommitted["aborted_transactions"] is None, "Kafka answers read_uncommitted with null"
    committed = fetch(broker, 0, READ_COMMITTED)
    assert values(committed["records"]) == [(0, 0)]
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (4, 1)
    assert committed["aborted_transactions"] == []

    assert marker(broker, commit=False).result(WAIT_S) == ErrorCode.NONE  # 4
    committed = fetch(broker, 0, READ_COMMITTED)
    assert values(committed["records"]) == [(0, 0), (1, 2), (3, 3), (4, 4)]
    assert committed["last_stable_offset"] == 5
    assert committed["aborted_transactions"] == [{"producer_id": PID, "first_offset": 1}]
    assert fetch(broker, 4, READ_COMMITTED)["aborted_transactions"] == [
        {"producer_id": PID, "first_offset": 1}
    ], "the range holds the abort's marker"
    assert fetch(broker, 5, READ_COMMITTED)["aborted_transactions"] == [], "nothing returned"


def test_a_read_committed_long_poll_waits_for_the_last_stable_offset(broker: DataBroker) -> None:
    produce(broker, txn_records(0))  # 0
    body = {**fetch_body(0, max_wait_ms=10_000), "isolation_level": READ_COMMITTED}
    waiting = broker.later(ApiKey.FETCH, 11, body)
    produce(broker, records(1))  # 1: the high watermark moves, the last stable offset does not
    assert not waiting.done()
    assert marker(broker, commit=True).result(WAIT_S) == ErrorCode.NONE  # 2
    answer = fetch_answer(decode_response(ApiKey.FETCH, 11, waiting.result(WAIT_S))[1])
    assert values(answer["records"]) == [(0, 0), (1, 1), (2, 2)]
    assert answer["aborted_transactions"] == []


def test_list_offsets_latest_is_the_last_stable_offset_for_read_committed(broker: DataBroker) -> None:
    produce(broker, records(2))  # 0-1
    produce(broker, txn_records(0))  # 2
    produce(broker, records(1))  # 3

    def latest(isolation: int) -> int:
        body = {**list_offsets_body(-1, 5), "isolation_level": isolation}
        offset: int = broker.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"]
        return offset

    assert (latest(0), latest(READ_COMMITTED)) == (4, 2)


def test_a_plain_batch_inside_a_transaction_is_invalid_txn_state(broker: DataBroker) -> None:
    produce(broker, txn_records(0))
    answer = produce(broker, txn_records(1, transactional=False))
    assert answer["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert broker.partition().log.log_end_offset == 1


def test_markers_from_stale_coordinators_or_producer_epochs_are_refused(broker: DataBroker) -> None:
    produce(broker, txn_records(0))
    assert marker(broker, commit=True, coordinator_epoch=4).result(WAIT_S) == ErrorCode.NONE
    produce(broker, txn_records(1))
    assert marker(broker, commit=False, coordinator_epoch=3).result(WAIT_S) == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    log = broker.partition().log
    end = log.log_end_offset
    log.append_marker(PID, 1, 4, False, 5)  # the coordinator bumped the producer's epoch
    assert (
        marker(broker, commit=False, coordinator_epoch=4).result(WAIT_S) == ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert log.log_end_offset == end + 1


def test_a_marker_waits_for_the_isr_like_acks_all(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    try:
        produce(broker, txn_records(0))
        broker.call(ApiKey.FETCH, 11, fetch_body(1, replica_id=2))  # follower 2 holds offset 0
        settled = marker(broker, commit=False)
        assert not settled.done()
        follower = fetch_answer(broker.call(ApiKey.FETCH, 11, fetch_body(1, replica_id=2)))
        assert follower["last_stable_offset"] == 0, "a follower's answer carries the last stable offset too"
        assert [h.is_control for h, _, _ in parse_batches(follower["records"])] == [True]
        broker.call(ApiKey.FETCH, 11, fetch_body(2, replica_id=2))
        assert settled.result(WAIT_S) == ErrorCode.NONE
        assert fetch(broker, 0, READ_COMMITTED)["last_stable_offset"] == 2
    finally:
        broker.rm.shutdown()


def test_a_marker_times_out_or_is_refused_as_acks_all_would_be(tmp_path: Path) -> None:
    broker = make(tmp_path, isr=(1, 2))
    try:
        produce(broker, txn_records(0))
        api = ProduceApi(broker.rm)
        assert api.append_marker(TP, PID, 0, 0, True, timeout_s=0.05).result(WAIT_S) == (
            ErrorCode.REQUEST_TIMED_OUT
        )
    finally:
        broker.rm.shutdown()
    broker = make(tmp_path / "few", isr=(1,), min_isr=2)
    try:
        assert marker(broker, commit=True).result(WAIT_S) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert broker.partition().log.log_end_offset == 0
    finally:
        broker.rm.shutdown()
    broker = make(tmp_path / "follower", leader=2)
    try:
        assert marker(broker, commit=True).result(WAIT_S) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        broker.rm.shutdown()


@pytest.mark.parametrize("version", [12, 17])
def test_flexible_fetches_carry_the_last_stable_offset_and_the_aborts(tmp_path: Path, version: int) -> None:
    leader = Leader(tmp_path)
    try:
        for data in (txn_records(0), records(1)):  # 0, 1
            leader.call(ApiKey.PRODUCE, 8, produce_body(data))
        topic = "t" if version < 13 else T_ID
        body = {**follower_fetch(version, 0, replica_id=-1, topic=topic), "isolation_level": READ_COMMITTED}
        _, open_txn = only_partition(leader.call(ApiKey.FETCH, version, body))
        assert (open_txn["high_watermark"], open_txn["last_stable_offset"]) == (2, 0)
        assert (open_txn["records"] or b"", open_txn["aborted_transactions"]) == (b"", [])
        assert ProduceApi(leader.rm).append_marker(TP, PID, 0, 0, False, timeout_s=WAIT_S).result(WAIT_S) == 0
        _, aborted = only_partition(leader.call(ApiKey.FETCH, version, body))
        assert offsets(aborted["records"]) == [0, 1, 2]
        assert aborted["last_stable_offset"] == 3
        assert aborted["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
        body["isolation_level"] = 0
        _, uncommitted = only_partition(leader.call(ApiKey.FETCH, version, body))
        assert uncommitted["aborted_transactions"] is None
    finally:
        leader.rm.shutdown()
