"""The log's use of idempotent producers' state across appends, followers, reopens, truncation and
retention: retries stored once, snapshots at rolls and on close, and the state rebuilt from them or
from the batches. The state's own rules and snapshot format are in ``test_producer_state.py``."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from broker.log import (
    InvalidProducerEpoch,
    Log,
    LogClosed,
    LogConfig,
    OutOfOrderSequence,
)
from broker.log.producer_snapshots import ProducerSnapshots
from broker.log.producer_state import (
    snapshot_file_name,
)
from broker.log.segment import Segment
from protocol.record_batch import build_batch, parse_batches
from tests.broker.log_builders import (
    NOW,
    PID,
    TP,
    batch,
    open_log,
    producer_batch,
    read_all,
    segment_files,
    spans,
)


def test_a_retried_batch_is_stored_once_and_answered_with_its_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    first = log.append_as_leader(producer_batch(PID, 0, 0, 3, timestamp=NOW), 0)
    assert (first.first_offset, first.last_offset, first.duplicate) == (2, 4, False)
    log.append_as_leader(producer_batch(PID, 0, 3, 1), 0)
    retry = log.append_as_leader(producer_batch(PID, 0, 0, 3, timestamp=NOW + 5), 1)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset, retry.max_timestamp) == (2, 4, NOW + 2)
    assert (retry.batches, retry.records, retry.bytes) == (0, 0, 0)
    assert log.log_end_offset == 6
    assert spans(read_all(log)) == [(0, 1), (2, 4), (5, 5)]
    assert log.epoch_entries() == ((0, 0),)  # the retry's leader epoch was not recorded either


def test_the_log_refuses_bad_sequences_and_epochs_appending_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(producer_batch(PID, 3, 0, 2), 0)
    size = log.size_bytes
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(producer_batch(PID, 3, 5), 0)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(producer_batch(PID, 2, 2), 0)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(producer_batch(PID, 3, 2) + producer_batch(PID, 3, 4), 0)
    assert (log.log_end_offset, log.size_bytes) == (2, size)
    entry = log.producer_entry(PID)
    assert entry is not None and (entry.epoch, entry.last_seq, entry.batches[-1].last_offset) == (3, 1, 1)
    assert log.append_as_leader(producer_batch(PID, 3, 2), 0).first_offset == 2
    assert log.producer_count == 1 and log.producer_entry(PID + 1) is None


def test_a_follower_builds_the_state_and_dedups_once_it_leads(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    for seq in range(0, 12, 2):
        leader.append_as_leader(producer_batch(PID, 1, seq, 2, timestamp=NOW + seq), 0)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.producer_entry(PID) == leader.producer_entry(PID)
    entry = follower.producer_entry(PID)
    assert entry is not None and len(entry.batches) == 5
    retry = follower.append_as_leader(producer_batch(PID, 1, 4, 2), 1)  # promoted: a client retries
    assert retry.duplicate and (retry.first_offset, retry.last_offset, retry.max_timestamp) == (4, 5, NOW + 5)
    assert follower.append_as_leader(producer_batch(PID, 1, 12, 1), 1).first_offset == 12


def test_a_follower_takes_what_the_leader_wrote_without_checks(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    gap = build_batch([(None, b"x")], 0, producer_id=PID, producer_epoch=0, base_sequence=0)
    later = build_batch([(None, b"x")], 1, producer_id=PID, producer_epoch=0, base_sequence=9)
    follower.append_as_follower(gap + later)
    entry = follower.producer_entry(PID)
    assert entry is not None and [b.last_seq for b in entry.batches] == [0, 9]


def _snapshots(directory: Path) -> list[int]:
    return sorted(int(p.name.removesuffix(".snapshot")) for p in directory.glob("*.snapshot"))


ONE = producer_batch(PID, 0, 0, 2)  # every batch below is this size: a fixed number fit a segment


def _producer_log(directory: Path, batches: int, *, pid: int = PID, start_seq: int = 0, **config: int) -> Log:
    """A log of ``batches`` 2-record batches of producer ``pid`` (epoch 0), three per segment."""
    log = Log.open(directory, LogConfig(segment_bytes=3 * len(ONE), **config))
    for i in range(batches):
        log.append_as_leader(producer_batch(pid, 0, start_seq + 2 * i, 2), 0)
    return log


def test_snapshots_are_taken_at_each_roll_and_on_close_only_when_the_state_moved(tmp_path: Path) -> None:
    log = _producer_log(tmp_path / TP, 7)
    assert log.segment_count == 3 and _snapshots(tmp_path / TP) == [6, 12]
    log.close()
    assert _snapshots(tmp_path / TP) == [6, 12, 14]
    log = Log.open(tmp_path / TP, log.config, recovery_point=14)
    log.close()
    assert _snapshots(tmp_path / TP) == [6, 12, 14]
    assert segment_files(tmp_path / TP) == [f"{b:020d}.log" for b in (0, 6, 12)]


def test_a_clean_reopen_loads_the_last_snapshot_knowing_one_batch_per_producer(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)
    log.flush()
    log.close()
    log = Log.open(directory, log.config, recovery_point=log.recovery_point)
    entry = log.producer_entry(PID)
    assert entry is not None and [(b.first_seq, b.last_seq, b.first_offset) for b in entry.batches] == [
        (12, 13, 12)
    ]
    assert log.append_as_leader(producer_batch(PID, 0, 12, 2), 0).duplicate
    with pytest.raises(OutOfOrderSequence):  # only one batch survives a snapshot (Kafka does the same)
        log.append_as_leader(producer_batch(PID, 0, 10, 2), 0)
    assert log.append_as_leader(producer_batch(PID, 0, 14, 1), 0).first_offset == 14


def test_a_crash_without_snapshots_rebuilds_the_state_from_the_batches(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)
    before = log.producer_entry(PID)
    log.close()
    for path in directory.glob("*.snapshot"):
        path.unlink()
    log = Log.open(directory, log.config)  # recovery point 0: not a clean shutdown
    assert log.producer_entry(PID) == before
    assert before is not None and len(before.batches) == 5
    assert log.append_as_leader(producer_batch(PID, 0, 6, 2), 0).duplicate  # the replay keeps five
    assert _snapshots(directory) == [6, 12, 14]  # the last two segment bases and the end


def _forbid_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    def replay(segment: Segment, offset: int) -> None:
        raise AssertionError(f"{segment.path.name} read from {offset} for producer state")

    monkeypatch.setattr(Segment, "producer_batches", replay)


def test_a_clean_log_without_snapshots_is_not_read_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)
    log.flush()
    log.close()
    for path in directory.glob("*.snapshot"):
        path.unlink()  # as if written before producer state existed
    _forbid_replay(monkeypatch)
    log = Log.open(directory, log.config, recovery_point=14)
    assert log.producer_count == 0
    assert _snapshots(directory) == [14]


def test_replay_starts_at_the_latest_snapshot(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)
    log.append_as_leader(producer_batch(PID + 1, 0, 0), 0)  # after the snapshot at 12
    log.close()
    (directory / snapshot_file_name(15)).unlink()
    log = Log.open(directory, log.config)
    first, second = log.producer_entry(PID), log.producer_entry(PID + 1)
    assert first is not None and [b.last_offset for b in first.batches] == [11, 13]  # snapshot, replay
    assert second is not None and second.batches[-1].last_offset == 14


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)
    expected = log.producer_entry(PID)
    log.close()
    latest = directory / snapshot_file_name(14)
    data = bytearray(latest.read_bytes())
    data[-3] ^= 0xFF
    latest.write_bytes(bytes(data))
    log = Log.open(directory, log.config, recovery_point=14)
    assert log.producer_entry(PID) is not None
    entry = log.producer_entry(PID)
    assert entry is not None and expected is not None and entry.batches[-1] == expected.batches[-1]
    assert [b.last_offset for b in entry.batches] == [11, 13]  # the snapshot at 12, then a replay
    assert any(
        latest.name in r.getMessage() and "CRC mismatch" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
    )
    assert _snapshots(directory) == [6, 12, 14]  # rewritten from the rebuilt state


def test_expired_producers_are_dropped_on_load_and_on_request(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = Log.open(directory, LogConfig(producer_id_expiration_ms=60_000))
    log.append_as_leader(producer_batch(1, 0, 0, timestamp=1000), 0)
    log.append_as_leader(producer_batch(2, 0, 0), 0)  # stamped now
    assert log.producer_count == 2
    assert log.remove_expired_producers(now_ms=61_000) == 1 and log.producer_entry(1) is None
    log.append_as_leader(producer_batch(1, 0, 0, timestamp=1000), 0)
    log.close()
    log = Log.open(directory, log.config, recovery_point=log.log_end_offset)
    assert log.producer_entry(1) is None and log.producer_entry(2) is not None
    assert log.remove_expired_producers() == 0
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(producer_batch(2, 0, 5), 0)


def test_truncation_forgets_the_batches_it_removes(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 7)  # offsets 0-13, snapshots at 6 and 12
    log.append_as_leader(producer_batch(PID + 1, 0, 0), 0)  # offset 14
    assert log.truncate_to(14) == 14
    assert log.producer_entry(PID + 1) is None
    assert log.truncate_to(9) == 8  # the batch 8-9 goes
    assert _snapshots(directory) == [6, 8]
    entry = log.producer_entry(PID)
    assert entry is not None and [(b.first_seq, b.last_seq) for b in entry.batches] == [(4, 5), (6, 7)]
    assert log.append_as_leader(producer_batch(PID, 0, 8, 2), 0).first_offset == 8  # not a duplicate
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(producer_batch(PID, 0, 12, 2), 0)


def test_truncation_of_a_log_without_producers_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.open(tmp_path / TP, LogConfig(segment_bytes=3 * len(batch(2))))
    for _ in range(7):
        log.append_as_leader(batch(2), 0)
    _forbid_replay(monkeypatch)
    assert log.truncate_to(9) == 8
    assert _snapshots(tmp_path / TP) == [6]


def test_truncating_fully_clears_the_state_and_every_snapshot(tmp_path: Path) -> None:
    log = _producer_log(tmp_path / TP, 7)
    log.truncate_fully_and_start_at(100)
    assert log.producer_count == 0 and _snapshots(tmp_path / TP) == []
    assert log.append_as_leader(producer_batch(PID, 0, 77), 0).first_offset == 100  # unknown again
    log.truncate_to(50)
    assert log.producer_count == 0


def test_retention_drops_snapshots_at_or_below_the_log_start_but_keeps_the_producers(tmp_path: Path) -> None:
    directory = tmp_path / TP
    log = _producer_log(directory, 9, retention_ms=0)  # segments at 0, 6, 12
    log.close()
    log = Log.open(directory, log.config, recovery_point=18)
    log.append_as_leader(producer_batch(PID, 0, 18, 2), 0)  # rolls: segment 18
    assert _snapshots(directory) == [6, 12, 18]
    assert log.delete_old_segments(now_ms=10**15, high_watermark=20) == 3
    assert log.log_start_offset == 18 and _snapshots(directory) == []
    entry = log.producer_entry(PID)
    assert entry is not None and entry.last_seq == 19
    log.close()
    log = Log.open(directory, log.config, recovery_point=20)
    assert _snapshots(directory) == [20]
    assert log.append_as_leader(producer_batch(PID, 0, 18, 2), 0).duplicate


def test_concurrent_retries_of_the_same_batches_store_each_once(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    outcomes: list[str] = []
    problems: list[BaseException] = []

    def producer() -> None:
        try:
            for seq in range(60):
                try:
                    info = log.append_as_leader(producer_batch(PID, 0, seq, timestamp=NOW), 0)
                    outcomes.append("duplicate" if info.duplicate else "appended")
                except OutOfOrderSequence:
                    outcomes.append("too old")
        except BaseException as exc:
            problems.append(exc)

    threads = [threading.Thread(target=producer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not problems, problems
    assert outcomes.count("appended") == 60 and log.log_end_offset == 60
    assert [h.base_sequence for h, _, _ in parse_batches(read_all(log))] == list(range(60))


def test_a_snapshot_that_cannot_be_written_does_not_stop_a_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = _producer_log(tmp_path / TP, 1)

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ProducerSnapshots, "write", disk_full)
    log.close()
    assert any(
        "no producer snapshot" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )
    with pytest.raises(LogClosed):
        log.read(0, 100)
