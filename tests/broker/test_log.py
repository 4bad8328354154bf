"""The partition log: appends as leader and follower, reads, rolls, truncation, retention, timestamps."""

from __future__ import annotations

import os
import struct
import threading
from itertools import pairwise
from pathlib import Path

import pytest

from broker.log import (
    InvalidRecord,
    Log,
    LogClosed,
    OffsetOutOfRange,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from protocol.record_batch import CorruptRecordBatch, build_batch, check_batch, parse_batches
from tests.broker.log_builders import (
    TP,
    batch,
    count_preads,
    open_log,
    read_all,
    segment_files,
    spans,
    with_crc_fixed,
)

# ---------------------------------------------------------------- appending and reading


def test_leader_append_assigns_offsets_and_the_epoch_keeping_everything_else(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    sent = [batch(2, base_offset=999), batch(3, base_offset=5), batch(1)]
    info = log.append_as_leader(b"".join(sent), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.batches, info.records) == (0, 5, 3, 6)
    assert info.bytes == sum(map(len, sent))
    stored = log.read(0, 1 << 20)
    assert spans(stored) == [(0, 1), (2, 4), (5, 5)]
    for (_, pos, size), raw in zip(parse_batches(stored), sent, strict=True):
        assert check_batch(stored[pos : pos + size]).partition_leader_epoch == 7  # CRC still valid
        assert stored[pos + 8 : pos + 12] == raw[8:12] and stored[pos + 16 : pos + size] == raw[16:]
    assert log.append_as_leader(batch(1), 7).first_offset == 6
    assert log.log_end_offset == 7
    assert log.epoch_entries() == ((7, 0),)


def test_append_info_reports_the_largest_timestamp_and_where_it_is(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(2, timestamp=50) + batch(2, timestamp=90) + batch(1, timestamp=10), 0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (91, 3)


def test_read_from_inside_a_batch_returns_that_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(5) + batch(5), 0)
    assert spans(log.read(3, 1 << 20)) == [(0, 4), (5, 9)]
    assert spans(log.read(9, 1 << 20)) == [(5, 9)]


def test_read_at_the_end_or_at_the_upper_bound_is_empty(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.read(0, 1000) == b""
    log.append_as_leader(batch(2) + batch(2), 0)
    assert log.read(4, 1000) == b""
    assert log.read(2, 1000, upper_bound=2) == b""


def test_upper_bound_keeps_only_batches_ending_before_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2) + batch(2) + batch(2), 0)
    assert spans(log.read(0, 1 << 20, upper_bound=4)) == [(0, 1), (2, 3)]
    assert spans(log.read(0, 1 << 20, upper_bound=3)) == [(0, 1)]
    assert log.read(0, 1 << 20, upper_bound=1) == b""  # the first batch reaches past the high watermark
    assert spans(log.read(0, 1 << 20, upper_bound=100)) == [(0, 1), (2, 3), (4, 5)]


def test_max_bytes_cuts_at_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    one = batch(1, value_size=100)
    log.append_as_leader(one * 4, 0)
    assert spans(log.read(0, 2 * len(one))) == [(0, 0), (1, 1)]
    assert spans(log.read(0, 3 * len(one) - 1)) == [(0, 0), (1, 1)]


def test_a_first_batch_above_max_bytes_comes_whole_only_with_min_one_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    big = batch(3, value_size=500)
    log.append_as_leader(big + batch(1), 0)
    assert log.read(1, 100) == log.read(0, len(big)) == log.read(0, 100, min_one_batch=True)
    assert spans(log.read(0, 100)) == [(0, 2)]
    assert log.read(0, 100, min_one_batch=False) == b""


def test_offsets_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.truncate_fully_and_start_at(10)
    log.append_as_leader(batch(2), 0)
    with pytest.raises(OffsetOutOfRange) as below:
        log.read(9, 1000)
    assert (below.value.offset, below.value.log_start_offset, below.value.log_end_offset) == (9, 10, 12)
    with pytest.raises(OffsetOutOfRange) as above:
        log.read(13, 1000)
    assert (above.value.log_start_offset, above.value.log_end_offset) == (10, 12)
    assert spans(log.read(10, 1000)) == [(10, 11)]


# ---------------------------------------------------------------- refusing


def _flipped(data: bytes, position: int) -> bytes:
    bad = bytearray(data)
    bad[position] ^= 0x01
    return bytes(bad)


@pytest.mark.parametrize(
    "records",
    [
        pytest.param(batch(1) + _flipped(batch(2), 70) + batch(1), id="crc-in-the-middle"),
        pytest.param(batch(1) + batch(2)[:-3], id="torn-last-batch"),
        pytest.param(batch(1) + b"\x00" * 20, id="trailing-garbage"),
        pytest.param(batch(1)[:16] + b"\x01" + batch(1)[17:], id="magic-1"),
    ],
)
def test_a_corrupt_batch_anywhere_appends_nothing(tmp_path: Path, records: bytes) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 3)
    with pytest.raises(CorruptRecordBatch):
        log.append_as_leader(records, 4)
    assert log.log_end_offset == 1
    assert log.size_bytes == len(batch(1)) == (tmp_path / TP / "00000000000000000000.log").stat().st_size
    assert log.epoch_entries() == ((3, 0),)


def test_a_batch_above_max_batch_bytes_is_too_large(tmp_path: Path) -> None:
    fits = batch(4, value_size=80)
    log = open_log(tmp_path, max_batch_bytes=len(fits))
    log.append_as_leader(fits, 0)
    with pytest.raises(RecordTooLarge) as err:
        log.append_as_leader(batch(1) + batch(5, value_size=80), 0)
    assert (err.value.size, err.value.max_size) == (len(batch(5, value_size=80)), len(fits))
    assert log.log_end_offset == 4


def test_no_batches_or_a_count_that_does_not_match_the_offsets_is_invalid(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecord, match="at least one"):
        log.append_as_leader(b"", 0)
    lying = bytearray(batch(3))
    struct.pack_into(">i", lying, 57, 2)  # records_count 2, last_offset_delta still 2
    with pytest.raises(InvalidRecord, match="2 records for 3 offsets"):
        log.append_as_leader(with_crc_fixed(lying), 0)
    empty = build_batch([])  # no records, last offset delta 0
    with pytest.raises(InvalidRecord):
        log.append_as_leader(empty, 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0


# ---------------------------------------------------------------- follower appends


def test_follower_append_keeps_the_leaders_offsets_and_learns_its_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(2), 1)
    leader.append_as_leader(batch(3), 1)
    leader.append_as_leader(batch(1), 4)
    follower = open_log(tmp_path / "follower")
    info = follower.append_as_follower(leader.read(0, 1 << 20))
    assert (info.first_offset, info.last_offset, info.batches) == (0, 5, 3)
    assert read_all(follower) == read_all(leader)
    assert follower.epoch_entries() == leader.epoch_entries() == ((1, 0), (4, 5))
    assert follower.end_offset_for_epoch(1) == (1, 5)


def test_follower_append_must_start_at_the_log_end(tmp_path: Path) -> None:
    follower = open_log(tmp_path)
    follower.append_as_follower(batch(2, base_offset=0))
    with pytest.raises(UnexpectedAppendOffset) as err:
        follower.append_as_follower(batch(1, base_offset=5))
    assert (err.value.expected, err.value.first_offset) == (2, 5)
    with pytest.raises(CorruptRecordBatch, match="goes back"):
        follower.append_as_follower(batch(1, base_offset=2) + batch(1, base_offset=2))
    assert follower.log_end_offset == 2


# ---------------------------------------------------------------- segments and indexes


def test_segments_roll_by_size_and_are_named_by_their_base_offset(tmp_path: Path) -> None:
    one = batch(3, value_size=100)
    log = open_log(tmp_path, segment_bytes=3 * len(one))
    for _ in range(7):
        log.append_as_leader(one, 0)
    directory = tmp_path / TP
    assert segment_files(directory) == [f"{base:020d}.log" for base in (0, 9, 18)]
    assert segment_files(directory, ".index") == [f"{base:020d}.index" for base in (0, 9, 18)]
    assert segment_files(directory, ".timeindex") == [f"{base:020d}.timeindex" for base in (0, 9, 18)]
    assert log.segment_count == 3 and log.size_bytes == 7 * len(one)
    assert log.recovery_point == 18  # a rolled segment is flushed
    assert spans(read_all(log)) == [(i, i + 2) for i in range(0, 21, 3)]


def test_an_append_bigger_than_a_segment_still_goes_in_one_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100)
    log.append_as_leader(batch(1, value_size=300), 0)
    log.append_as_leader(batch(1, value_size=300), 0)
    assert segment_files(tmp_path / TP) == [f"{0:020d}.log", f"{1:020d}.log"]


def test_segments_roll_by_time_from_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch(1, timestamp=10_000), 0)
    log.append_as_leader(batch(1, timestamp=11_000), 0)  # waited exactly segment.ms: not more
    assert log.segment_count == 1
    log.append_as_leader(batch(1, timestamp=11_001), 0)
    assert log.segment_count == 2


def test_segments_without_timestamps_roll_by_their_age(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    untimed = build_batch([(None, b"x")], timestamps=[-1])
    log.append_as_leader(untimed, 0)
    created = int(os.stat(tmp_path / TP / f"{0:020d}.log").st_mtime * 1000)
    log.append_as_leader(untimed, 0, now_ms=created + 10)
    assert log.segment_count == 1
    log.append_as_leader(untimed, 0, now_ms=created + 60_000)
    assert log.segment_count == 2


def _index_entries(path: Path) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">ii", path.read_bytes()))


def test_index_entries_follow_index_interval_bytes_like_kafka(tmp_path: Path) -> None:
    one = batch(2, value_size=40)
    log = open_log(tmp_path, index_interval_bytes=2 * len(one))
    for _ in range(8):
        log.append_as_leader(one, 0)
    # an entry for a batch once more than the interval has passed since the last one: every third batch
    assert _index_entries(tmp_path / TP / f"{0:020d}.index") == [(7, 3 * len(one)), (13, 6 * len(one))]


def test_a_read_near_the_end_of_a_large_log_reads_only_near_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    one = batch(10, value_size=100)  # 1151 bytes
    for _ in range(4):
        log.append_as_leader(one * 800, 0)  # 4 MB in all
    assert log.size_bytes == 3200 * len(one) > 3_600_000
    read_bytes = count_preads(monkeypatch)
    data = log.read(log.log_end_offset - 25, 16 * 1024)
    assert spans(data) == [(31970, 31979), (31980, 31989), (31990, 31999)]
    assert sum(read_bytes) < 32 * 1024


# ---------------------------------------------------------------- truncation


def test_truncate_to_removes_every_batch_reaching_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3) + batch(3) + batch(3), 0)
    assert log.truncate_to(7) == 6  # batch 6-8 straddles 7: it goes whole
    assert spans(read_all(log)) == [(0, 2), (3, 5)]
    assert log.truncate_to(3) == 3  # at a boundary: the batch before stays
    assert spans(read_all(log)) == [(0, 2)]
    assert log.truncate_to(100) == 3  # past the end: nothing happens
    assert log.append_as_leader(batch(1), 0).first_offset == 3
    assert (tmp_path / TP / f"{0:020d}.log").stat().st_size == log.size_bytes == len(batch(3) + batch(1))


def test_truncate_to_across_segments_deletes_later_segments_and_their_epochs(tmp_path: Path) -> None:
    one = batch(2, value_size=100)
    log = open_log(tmp_path, segment_bytes=2 * len(one), index_interval_bytes=1)
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append_as_leader(one, epoch)  # segments at 0, 4, 8
    log.flush()
    assert log.epoch_entries() == ((1, 0), (2, 4), (3, 8))
    assert log.truncate_to(5) == 4
    assert segment_files(tmp_path / TP) == [f"{0:020d}.log", f"{4:020d}.log"]
    assert _index_entries(tmp_path / TP / f"{4:020d}.index") == []
    assert log.epoch_entries() == ((1, 0),)
    assert (log.log_end_offset, log.recovery_point, log.segment_count) == (4, 4, 2)
    assert log.append_as_leader(one, 4).first_offset == 4
    assert log.epoch_entries() == ((1, 0), (4, 4))
    assert spans(read_all(log)) == [(0, 1), (2, 3), (4, 5)]


def test_truncate_to_below_the_first_segment_starts_over_there(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.truncate_fully_and_start_at(10)
    log.append_as_leader(batch(2), 0)
    assert log.truncate_to(4) == 4
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    one = batch(2, value_size=100)
    log = open_log(tmp_path, segment_bytes=len(one))
    for _ in range(3):
        log.append_as_leader(one, 2)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (50, 50, 50)
    assert segment_files(tmp_path / TP) == [f"{50:020d}.log"]
    assert log.epoch_entries() == () and log.latest_epoch() is None
    assert log.append_as_leader(one, 3).first_offset == 50
    assert spans(read_all(log)) == [(50, 51)]


# ---------------------------------------------------------------- retention


def _timed_segments(tmp_path: Path, **config: int) -> tuple[Log, bytes]:
    """Four segments of one 2-record batch each, stamped 1000, 2000, 3000 and 4000."""
    one = batch(2, value_size=100)
    log = open_log(tmp_path, segment_bytes=len(one), **config)
    for ts in (1000, 2000, 3000, 4000):
        log.append_as_leader(batch(2, value_size=100, timestamp=ts), 0)
    assert log.segment_count == 4
    return log, one


def test_retention_by_time_deletes_old_segments_below_the_high_watermark(tmp_path: Path) -> None:
    log, _ = _timed_segments(tmp_path, retention_ms=1000)
    assert log.delete_old_segments(now_ms=3500, high_watermark=8) == 2  # largest 1001, 2001 < 2500
    assert (log.log_start_offset, log.segment_count) == (4, 2)
    assert segment_files(tmp_path / TP) == [f"{4:020d}.log", f"{6:020d}.log"]
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 1000)


def test_retention_waits_for_the_high_watermark(tmp_path: Path) -> None:
    log, _ = _timed_segments(tmp_path, retention_ms=0)
    assert log.delete_old_segments(now_ms=10_000, high_watermark=1) == 0  # offset 1 not yet committed
    assert log.delete_old_segments(now_ms=10_000, high_watermark=5) == 2  # 4 and 5 are in the third
    assert log.log_start_offset == 4


def test_retention_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log, _ = _timed_segments(tmp_path, retention_ms=0)
    assert log.delete_old_segments(now_ms=10**12, high_watermark=8) == 3
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (6, 8, 1)


def test_retention_by_size_deletes_oldest_segments_until_under_the_limit(tmp_path: Path) -> None:
    log, one = _timed_segments(tmp_path, retention_ms=-1, retention_bytes=2 * len(batch(2, value_size=100)))
    assert log.delete_old_segments(now_ms=10**12, high_watermark=8) == 2
    assert log.size_bytes == 2 * len(one)
    assert log.delete_old_segments(now_ms=10**12, high_watermark=8) == 0


def test_retention_of_segments_without_timestamps_goes_by_file_age(tmp_path: Path) -> None:
    untimed = build_batch([(None, bytes(100))], timestamps=[-1])
    log = open_log(tmp_path, segment_bytes=len(untimed), retention_ms=60_000)
    for _ in range(3):
        log.append_as_leader(untimed, 0)
    now_ms = 10**12
    os.utime(tmp_path / TP / f"{0:020d}.log", ns=(0, (now_ms - 120_000) * 10**6))
    os.utime(tmp_path / TP / f"{1:020d}.log", ns=(0, (now_ms - 30_000) * 10**6))
    assert log.delete_old_segments(now_ms=now_ms, high_watermark=3) == 1
    assert log.log_start_offset == 1


def test_retention_moves_the_epoch_cache_start(tmp_path: Path) -> None:
    one = batch(2, value_size=100)
    log = open_log(tmp_path, segment_bytes=len(one), retention_ms=0)
    for epoch in (1, 1, 2):
        log.append_as_leader(one, epoch)
    assert log.delete_old_segments(now_ms=10**6, high_watermark=6) == 2
    assert log.epoch_entries() == ((2, 4),)
    assert log.epoch_for_offset(4) == 2


# ---------------------------------------------------------------- timestamps


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(tmp_path: Path) -> None:
    one = batch(5, timestamp=0, value_size=50)
    log = open_log(tmp_path, segment_bytes=4 * len(one), index_interval_bytes=len(one))
    for ts in range(0, 5000, 100):  # 50 batches, 5 records each, record i stamped ts + i
        log.append_as_leader(batch(5, timestamp=ts, value_size=50), 0)
    assert log.segment_count > 10
    assert log.offset_for_timestamp(-5) == (0, 0)
    assert log.offset_for_timestamp(2302) == (23 * 5 + 2, 2302)
    assert log.offset_for_timestamp(2305) == (24 * 5, 2400)  # between batches: the next record
    assert log.offset_for_timestamp(4904) == (249, 4904)
    assert log.offset_for_timestamp(4905) is None


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=1)
    for ts in (100, 500, 300, 700, 200):
        log.append_as_leader(batch(1, timestamp=ts), 0)
    assert log.offset_for_timestamp(250) == (1, 500)
    assert log.offset_for_timestamp(600) == (3, 700)


def test_a_compressed_batch_answers_with_its_first_offset_and_largest_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, timestamp=10), 0)
    compressed = bytearray(batch(4, timestamp=20))
    compressed[22] |= 0x01  # attributes: gzip (the bytes are not really gzip: the log never looks)
    log.append_as_leader(with_crc_fixed(compressed), 0)
    assert log.offset_for_timestamp(22) == (2, 23)


# ---------------------------------------------------------------- epochs, lifetime


def test_epoch_queries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    log.assign_epoch(2, log.log_end_offset)
    log.append_as_leader(batch(2), 2)
    assert log.latest_epoch() == 2
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (0, 3)
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(3) == (-1, -1)
    assert [log.epoch_for_offset(o) for o in (0, 2, 3, 4)] == [0, 0, 2, 2]


def test_a_closed_log_refuses_work_and_a_deleted_one_is_gone(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 0)
    log.close()
    log.close()
    with pytest.raises(LogClosed):
        log.read(0, 100)
    with pytest.raises(LogClosed):
        log.append_as_leader(batch(1), 0)
    log.delete()
    assert not (tmp_path / TP).exists()


# ---------------------------------------------------------------- concurrency


def _check_whole(data: bytes, start: int) -> None:
    walked = parse_batches(data, allow_partial=False, verify_crc=True)
    assert walked and walked[0][0].base_offset <= start <= walked[0][0].last_offset
    for (before, _, _), (after, _, _) in pairwise(walked):
        assert after.base_offset == before.next_offset


def test_a_reader_thread_never_sees_part_of_a_batch_while_the_writer_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=64 * 1024, index_interval_bytes=512)
    done = threading.Event()
    problems: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not done.is_set():
                end = log.log_end_offset
                for start in (0, end // 2, max(end - 1, 0)):
                    data = log.read(start, 8192)
                    if start < end:
                        _check_whole(data, start)
                        reads[0] += 1
        except BaseException as exc:
            problems.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(1500):
            log.append_as_leader(batch(1 + i % 7, value_size=i % 300), i // 100)
    finally:
        done.set()
        thread.join()
    assert not problems, problems
    assert reads[0] > 0
    assert spans(read_all(log))[-1][1] == log.log_end_offset - 1


def test_readers_survive_truncation_and_retention_on_the_writer(tmp_path: Path) -> None:
    one = batch(2, value_size=200)
    log = open_log(tmp_path, segment_bytes=4 * len(one), retention_ms=0)
    done = threading.Event()
    problems: list[BaseException] = []

    def reader() -> None:
        try:
            while not done.is_set():
                start = log.log_start_offset
                try:
                    data = log.read(start, 4096)
                except OffsetOutOfRange:
                    continue
                if data:
                    _check_whole(data, start)
        except BaseException as exc:
            problems.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(150):
            for _ in range(6):
                log.append_as_leader(one, 0)
            log.truncate_to(log.log_end_offset - 3)
            log.delete_old_segments(now_ms=10**13, high_watermark=log.log_end_offset)
    finally:
        done.set()
        thread.join()
    assert not problems, problems
