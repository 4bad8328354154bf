"""Transactions in a partition log, on real files: transactional batches and markers move the last
stable offset as Kafka's would, aborts land in the segments' ``.txnindex`` (Kafka's bytes), and the
open transactions and the index survive reopens, crashes, truncation, retention and replication."""

from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.log import (
    AppendInfo,
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    Log,
    LogConfig,
    TransactionCoordinatorFenced,
)
from broker.log.segment import Segment, file_name
from protocol.control_records import control_batch
from protocol.record_batch import build_batch, parse_batches
from tests.broker.log_builders import NOW, TP, batch, open_log, producer_batch, read_all

P1, P2, P3 = 7001, 7002, 7003
SMALL_SEGMENTS = {"segment_bytes": 160}
"""Two batches or so per segment."""


@dataclass
class Producer:
    """A transactional producer writing to one log as its leader would see it."""

    pid: int
    epoch: int = 0
    sequence: int = 0

    def send(self, log: Log, records: int = 1, *, transactional: bool = True) -> AppendInfo:
        data = producer_batch(self.pid, self.epoch, self.sequence, records, transactional=transactional)
        info = log.append_as_leader(data, 0)
        self.sequence += records
        return info

    def end(self, log: Log, *, commit: bool, coordinator_epoch: int = 0) -> AppendInfo:
        return log.append_marker(self.pid, self.epoch, coordinator_epoch, commit, 0)


def txn_index_entries(directory: Path) -> list[tuple[int, int, int, int, int]]:
    """Every entry of every ``.txnindex`` in ``directory``, by segment, as Kafka's five fields."""
    entries = []
    for path in sorted(directory.glob("*.txnindex")):
        entries += list(struct.iter_unpack(">hqqqq", path.read_bytes()))
    return entries


def plain(log: Log, count: int = 1) -> None:
    """``count`` batches of a producer without an id, stamped now (an old stamp would roll the segment)."""
    for _ in range(count):
        log.append_as_leader(batch(1, timestamp=time.time_ns() // 1_000_000), 0)


# ---------------------------------------------------------------- the last stable offset


def test_a_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producer = Producer(P1)
    plain(log)
    assert producer.send(log, 2).first_offset == 1
    plain(log)
    assert log.last_stable_offset(4) == 1
    assert log.last_stable_offset(0) == 0, "never above the high watermark"
    entry = log.producer_entry(P1)
    assert entry is not None and entry.current_txn_first_offset == 1
    marker = producer.end(log, commit=True)
    assert (marker.first_offset, marker.last_offset, log.log_end_offset) == (4, 4, 5)
    assert log.last_stable_offset(4) == 1, "the high watermark has not passed the marker"
    assert log.last_stable_offset(5) == 5
    assert log.last_stable_offset(4) == 4, "a transaction the high watermark passed is forgotten"
    entry = log.producer_entry(P1)
    assert entry is not None and entry.current_txn_first_offset == -1
    assert log.aborted_transactions(0, 5) == [], "a commit is not indexed"
    assert not list((tmp_path / TP).glob("*.txnindex"))


def test_interleaved_transactions_and_the_aborted_index(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(P1), Producer(P2)
    a.send(log)  # 0
    b.send(log)  # 1
    a.send(log)  # 2
    b.send(log)  # 3
    assert log.last_stable_offset(4) == 0
    a.end(log, commit=False)  # 4
    assert log.last_stable_offset(5) == 1, "b's transaction is still open"
    b.end(log, commit=True)  # 5
    assert log.last_stable_offset(5) == 1, "b's marker is not replicated yet"
    assert log.last_stable_offset(6) == 6
    # The abort's last stable offset is where b's open transaction started (Kafka's).
    assert txn_index_entries(tmp_path / TP) == [(0, P1, 0, 4, 1)]
    assert log.aborted_transactions(0, 6) == [(P1, 0)]
    assert log.aborted_transactions(4, 5) == [(P1, 0)]
    assert log.aborted_transactions(5, 6) == [], "the abort's marker is below the range"


def test_the_txnindex_bytes_are_kafkas(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producer = Producer(P1)
    plain(log)
    producer.send(log, 2)  # 1-2
    producer.end(log, commit=False)  # 3
    data = (tmp_path / TP / file_name(0, ".txnindex")).read_bytes()
    assert data == bytes.fromhex(
        "0000"  # version 0
        "0000000000001b59"  # producer id 7001
        "0000000000000001"  # first offset
        "0000000000000003"  # last offset: the marker's
        "0000000000000004"  # last stable offset: after the marker, nothing else is open
    )


def test_a_marker_without_an_open_transaction_ends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    plain(log)
    info = Producer(P1).end(log, commit=False, coordinator_epoch=3)
    assert info.first_offset == 1 and log.log_end_offset == 2
    assert log.last_stable_offset(2) == 2
    assert log.aborted_transactions(0, 2) == []
    assert not list((tmp_path / TP).glob("*.txnindex"))
    entry = log.producer_entry(P1)
    assert entry is not None and (entry.coordinator_epoch, entry.current_txn_first_offset) == (3, -1)


# ---------------------------------------------------------------- refusals on the leader


def test_stale_markers_and_plain_batches_inside_a_transaction_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producer = Producer(P1, epoch=3)
    producer.send(log)  # 0
    producer.end(log, commit=True, coordinator_epoch=5)  # 1
    producer.send(log)  # 2: a new transaction
    size, end = log.size_bytes, log.log_end_offset
    with pytest.raises(TransactionCoordinatorFenced):
        producer.end(log, commit=False, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpoch):
        log.append_marker(P1, 2, 5, False, 0)
    with pytest.raises(InvalidTxnState):
        producer.send(log, transactional=False)
    assert (log.size_bytes, log.log_end_offset) == (size, end), "nothing appended"
    assert log.last_stable_offset(end) == 2
    producer.end(log, commit=False, coordinator_epoch=5)  # 3
    assert log.aborted_transactions(0, 4) == [(P1, 2)]
    assert producer.send(log, transactional=False).first_offset == 4, "outside a transaction"


def test_a_coordinators_transactional_batches_have_only_their_epoch_checked(tmp_path: Path) -> None:
    log = open_log(tmp_path)  # as __consumer_offsets takes a producer's TxnOffsetCommits
    commit = producer_batch(P1, 2, 0, transactional=True)
    assert log.append_as_leader(commit, 0, coordinator=True).first_offset == 0
    again = log.append_as_leader(commit, 0, coordinator=True)
    assert (again.first_offset, again.duplicate) == (1, False), "no sequence, so never a retry"
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(producer_batch(P1, 1, 0, transactional=True), 0, coordinator=True)
    assert log.last_stable_offset(2) == 0
    log.append_marker(P1, 2, 0, True, 0)
    assert log.last_stable_offset(3) == 3


def test_clients_may_not_write_control_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecord):
        log.append_as_leader(control_batch(P1, 0, 0, True, NOW), 0)
    assert log.log_end_offset == 0


def test_a_marker_of_a_newer_epoch_fences_the_producers_older_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    old = Producer(P1, epoch=0)
    old.send(log, 2)  # 0-1
    log.append_marker(P1, 1, 0, False, 0)  # 2: the coordinator aborts with a bumped epoch
    entry = log.producer_entry(P1)
    assert entry is not None and (entry.epoch, entry.batches) == (1, ())
    with pytest.raises(InvalidProducerEpoch):
        old.send(log)
    assert Producer(P1, epoch=1).send(log).first_offset == 3
    assert log.aborted_transactions(0, 4) == [(P1, 0)]


# ---------------------------------------------------------------- across segments


def _three_aborts(log: Log) -> None:
    """P1 aborted at 6 while P2 is open (from 1), P2 aborted at 10, P3 aborted at 12 (at 11 alone)."""
    a, b, c = Producer(P1), Producer(P2), Producer(P3)
    a.send(log)  # 0
    b.send(log)  # 1
    plain(log, 4)  # 2-5
    a.end(log, commit=False)  # 6
    plain(log, 3)  # 7-9
    b.end(log, commit=False)  # 10
    c.send(log)  # 11
    c.end(log, commit=False)  # 12


def test_aborted_transactions_are_collected_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    _three_aborts(log)
    assert log.segment_count >= 5
    entries = txn_index_entries(tmp_path / TP)
    assert entries == [(0, P1, 0, 6, 1), (0, P2, 1, 10, 11), (0, P3, 11, 12, 13)]
    assert len(list((tmp_path / TP).glob("*.txnindex"))) >= 2, "each abort in its marker's segment"
    assert log.aborted_transactions(0, 13) == [(P1, 0), (P2, 1), (P3, 11)]
    assert log.aborted_transactions(2, 3) == [(P1, 0), (P2, 1)], "read from a segment without aborts"
    assert log.aborted_transactions(7, 10) == [(P2, 1)]
    assert log.aborted_transactions(11, 12) == [(P3, 11)]
    assert log.aborted_transactions(13, 13) == []


# ---------------------------------------------------------------- reopening


def _open_and_aborted(log: Log) -> tuple[Producer, Producer]:
    """P1 committed (0, marker 1), P2 aborted (2, marker 3), then P1's transaction open from 5."""
    a, b = Producer(P1), Producer(P2)
    a.send(log)  # 0
    a.end(log, commit=True, coordinator_epoch=5)  # 1
    b.send(log)  # 2... then aborted
    b.end(log, commit=False, coordinator_epoch=5)  # 3
    plain(log)  # 4
    a.send(log)  # 5: open
    plain(log)  # 6
    return a, b


def test_a_clean_reopen_keeps_the_open_transactions_and_the_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    a, _ = _open_and_aborted(log)
    before = txn_index_entries(tmp_path / TP)
    log.flush()
    log.close()
    log = Log.open(tmp_path / TP, log.config, recovery_point=7)
    assert log.last_stable_offset(7) == 5
    assert log.aborted_transactions(0, 7) == [(P2, 2)]
    assert txn_index_entries(tmp_path / TP) == before == [(0, P2, 2, 3, 4)]
    entry = log.producer_entry(P1)
    assert entry is not None and (entry.current_txn_first_offset, entry.coordinator_epoch) == (5, 5)
    a.end(log, commit=False, coordinator_epoch=5)  # 7
    assert log.last_stable_offset(8) == 8
    assert log.aborted_transactions(0, 8) == [(P2, 2), (P1, 5)]


@pytest.mark.parametrize("lose", ["snapshots", "snapshots-and-txnindex", "nothing"])
def test_a_crash_that_cut_the_last_marker_rebuilds_the_state_and_the_index(tmp_path: Path, lose: str) -> None:
    directory = tmp_path / TP
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    _three_aborts(log)
    log.close()
    for suffix in {"snapshots": [".snapshot"], "snapshots-and-txnindex": [".snapshot", ".txnindex"]}.get(
        lose, []
    ):
        for path in directory.glob(f"*{suffix}"):
            path.unlink()
    last = max(directory.glob("*.log"))
    os.truncate(last, last.stat().st_size - 5)  # P3's abort marker at 12 is torn
    log = Log.open(directory, log.config)  # recovery point 0: not a clean shutdown
    assert log.log_end_offset == 12
    assert log.last_stable_offset(12) == 11, "P3's transaction is open again"
    assert log.aborted_transactions(0, 12) == [(P1, 0), (P2, 1)]
    assert txn_index_entries(directory) == [(0, P1, 0, 6, 1), (0, P2, 1, 10, 11)]
    log.append_marker(P3, 0, 0, False, 0)
    assert txn_index_entries(directory)[-1] == (0, P3, 11, 12, 13)


def test_a_missing_or_torn_txnindex_is_tolerated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / TP
    log = open_log(tmp_path)
    _open_and_aborted(log)
    log.flush()
    log.close()
    index = directory / file_name(0, ".txnindex")
    with index.open("ab") as f:
        f.write(b"\x00\x00\x01")  # a crash in the middle of the next entry
    log = Log.open(directory, log.config, recovery_point=7)
    assert log.aborted_transactions(0, 7) == [(P2, 2)]
    assert index.stat().st_size == 34
    assert any("torn" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    log.close()
    index.unlink()  # a log older than transactions: a clean open trusts the segments as they are
    log = Log.open(directory, log.config, recovery_point=7)
    assert log.aborted_transactions(0, 7) == []
    assert log.last_stable_offset(7) == 5


# ---------------------------------------------------------------- truncation and retention


def test_truncation_drops_the_aborts_it_cuts_and_reopens_their_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(P1), Producer(P2)
    a.send(log)  # 0
    a.end(log, commit=False)  # 1
    b.send(log)  # 2
    b.end(log, commit=False)  # 3
    log.truncate_to(3)
    assert txn_index_entries(tmp_path / TP) == [(0, P1, 0, 1, 2)]
    assert log.last_stable_offset(3) == 2, "P2's transaction is open again"
    log.truncate_to(2)
    assert log.last_stable_offset(2) == 2
    log.truncate_to(1)
    assert txn_index_entries(tmp_path / TP) == []
    assert log.aborted_transactions(0, 1) == []
    assert log.last_stable_offset(1) == 0


def test_retention_deletes_the_txnindex_of_the_segments_it_deletes(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS, retention_bytes=0)
    _three_aborts(log)
    plain(log, 2)  # the markers' segments are no longer the active one
    assert log.delete_old_segments(now_ms=NOW, high_watermark=log.log_end_offset) > 0
    assert log.segment_count == 1
    assert not list((tmp_path / TP).glob("*.txnindex"))
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []


# ---------------------------------------------------------------- followers


def test_a_follower_applies_the_leaders_markers_and_indexes_its_aborts(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", **SMALL_SEGMENTS)
    _three_aborts(leader)
    follower = open_log(tmp_path / "follower", **SMALL_SEGMENTS)
    replicated = read_all(leader)
    for header, position, size in parse_batches(replicated):
        follower.append_as_follower(replicated[position : position + size])
        assert follower.log_end_offset == header.next_offset
    assert txn_index_entries(tmp_path / "follower" / TP) == txn_index_entries(tmp_path / "leader" / TP)
    assert follower.aborted_transactions(0, 13) == leader.aborted_transactions(0, 13)
    for hw in range(14):
        assert follower.last_stable_offset(hw) == leader.last_stable_offset(hw)


def test_a_follower_takes_markers_the_leader_would_refuse_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path)

    def data(offset: int, sequence: int, *, transactional: bool = True) -> bytes:
        return build_batch(
            [(None, b"v")], offset, producer_id=P1, producer_epoch=0, base_sequence=sequence,
            transactional=transactional,
        )  # fmt: skip

    log.append_as_follower(data(0, 0))
    log.append_as_follower(control_batch(P1, 0, 5, True, NOW, base_offset=1))
    log.append_as_follower(data(2, 1))
    log.append_as_follower(data(3, 2, transactional=False))  # a plain batch inside the transaction
    log.append_as_follower(control_batch(P1, 0, 3, False, NOW, base_offset=4))  # an older coordinator
    assert log.log_end_offset == 5
    assert log.aborted_transactions(0, 5) == [(P1, 2)]
    entry = log.producer_entry(P1)
    assert entry is not None and (entry.coordinator_epoch, entry.current_txn_first_offset) == (3, -1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("not transactional" in w for w in warnings)
    assert any("coordinator epoch 3" in w for w in warnings)


def test_transactional_producers_never_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path, producer_id_expiration_ms=1)
    Producer(P1).send(log)
    Producer(P2).send(log, transactional=False)
    assert log.remove_expired_producers(now_ms=2**62) == 1
    assert log.producer_entry(P1) is not None
    assert log.last_stable_offset(2) == 0


def test_open_transactions_come_back_from_the_snapshot_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    Producer(P1).send(log)
    plain(log, 6)
    log.flush()
    log.close()

    def replay(segment: Segment, offset: int) -> None:
        raise AssertionError(f"{segment.path.name} read from {offset} for producer state")

    monkeypatch.setattr(Segment, "producer_batches", replay)
    reopened = Log.open(tmp_path / TP, LogConfig(**SMALL_SEGMENTS), recovery_point=7)
    assert reopened.last_stable_offset(7) == 0
