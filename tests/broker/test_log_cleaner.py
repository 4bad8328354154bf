"""The log cleaner on real log files: the latest value of each key survives, tombstones wait for their
delete horizon, the active segment and young records are left alone, and the checkpoint says where
the next cleaning starts. Time is the ``now_ms`` each cleaning is given; nothing sleeps."""

from __future__ import annotations

import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from broker.cleaner import UNLIMITED_IO, CleanerConfig, LogCleaner
from broker.cleaner.throttler import Throttler
from broker.log.offset_map import ENTRY_BYTES, OffsetMap
from protocol.compression import GZIP, LZ4, MAX_DECOMPRESSED_BYTES, SNAPPY, ZSTD, compress
from protocol.record_batch import (
    HEADER_SIZE,
    RecordBatchHeader,
    build_batch,
    pack_batch,
    parse_header,
)
from tests.broker.cleaner_builders import (
    DAY_MS,
    NOW,
    TP,
    compacted_log,
    fill,
    harness,
    latest_values,
    put,
    records,
    roll_past,
)


def test_the_latest_value_of_each_key_survives(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=10, rounds=20)
    before = log.size_bytes
    h = harness(tmp_path, log)
    assert h.clean()
    assert latest_values(log) == latest
    assert log.size_bytes < before / 4
    # only keys whose latest record is in the active segment appear twice (once cleaned, once active)
    keys = [s.key for s in records(log)]
    active_keys = {s.key for s in records(log) if s.offset >= log.cleaning_view().active_base}
    assert all(keys.count(k) == 1 for k in set(keys) - active_keys)
    [event] = h.events
    assert event["kind"] == "log_cleaned" and event["topic_partition"] == "compacted-0"
    assert event["start_offset"] == 0 and event["end_offset"] == log.cleaning_view().active_base
    cleaned = 200 - (log.log_end_offset - event["end_offset"])
    assert event["records_kept"] + event["records_removed"] == cleaned
    assert event["bytes_written"] < event["bytes_read"]


def test_tombstones_stay_until_their_delete_horizon_then_go(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, delete_retention_ms=DAY_MS, min_cleanable_ratio=0.0)
    fill(log, keys=5, rounds=4)
    put(log, "k1", None)
    roll_past(log, "a")
    h = harness(tmp_path, log)
    assert h.clean(NOW)
    [tombstone] = [s for s in records(log) if s.key == b"k1"]
    assert tombstone.value is None
    assert tombstone.header.delete_horizon_ms == NOW + DAY_MS  # KIP-534: stamped by the first cleaning
    roll_past(log, "b")
    assert h.clean(NOW + DAY_MS - 1)
    assert [s.value for s in records(log) if s.key == b"k1"] == [None]  # not yet
    roll_past(log, "c")
    assert h.clean(NOW + DAY_MS)
    assert not [s for s in records(log) if s.key == b"k1"]
    assert latest_values(log)["k2"] == "v3-2"


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=3, rounds=30)
    active = log.cleaning_view().segments[-1]
    before = active.path.read_bytes()
    assert harness(tmp_path, log).clean()
    assert log.cleaning_view().segments[-1] is active
    assert active.path.read_bytes() == before
    assert len({s.key for s in records(log) if s.offset >= active.base_offset}) < len(before)


def test_the_checkpoint_is_written_and_the_next_cleaning_starts_there(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=10, rounds=10)
    h = harness(tmp_path, log)
    assert h.clean()
    first_end = h.events[-1]["end_offset"]
    assert h.checkpoint() == f"0\n1\n{TP.topic} {TP.partition} {first_end}\n"
    assert not h.clean()  # nothing dirty enough: the cleaner backs off
    fill(log, keys=10, rounds=10)
    again = harness(tmp_path, log)  # a new cleaner (a restart) reads the checkpoint
    assert again.clean()
    assert again.events[-1]["start_offset"] == first_end


def test_min_compaction_lag_leaves_young_segments_dirty(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_compaction_lag_ms=60_000)
    fill(log, keys=4, rounds=6, now=NOW)
    old_end = log.log_end_offset
    fill(log, keys=4, rounds=6, now=NOW + 50_000)
    h = harness(tmp_path, log)
    assert h.clean(NOW + 70_000)
    end = h.events[-1]["end_offset"]
    assert end <= old_end + 12  # the segment holding the young records' start bounds the cleaning
    young = [s for s in records(log) if s.offset >= end]
    assert len(young) == log.log_end_offset - end  # nothing young was removed


def test_max_compaction_lag_cleans_a_log_below_its_ratio(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_ratio=0.9, max_compaction_lag_ms=1000)
    fill(log, keys=40, rounds=1)
    h = harness(tmp_path, log)
    assert h.clean(NOW)  # never cleaned: all dirty
    roll_past(log, "new")  # a little dirt
    assert not h.clean(NOW + 500)
    assert h.cleaner.max_compaction_delay_secs() == 0
    assert h.clean(NOW + 5000)
    assert h.cleaner.threads[0].last_compaction_delay_ms == 4000


def test_a_full_offset_map_cleans_only_up_to_where_it_filled(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_ratio=0.0)
    latest = fill(log, keys=200, rounds=2)
    h = harness(tmp_path, log, dedupe_buffer_size=100 * ENTRY_BYTES, dedupe_buffer_load_factor=0.5)
    assert h.clean()
    end = h.events[-1]["end_offset"]
    assert end == 50  # 50 keys mapped: the map is full at the 51st
    assert h.cleaner.max_buffer_utilization_percent() == 50
    assert h.checkpoint().endswith(f" {end}\n")
    while h.clean():  # each cleaning maps 50 more keys
        pass
    assert latest_values(log) == latest and len(records(log)) < 250


def test_the_offset_map_stays_within_its_memory() -> None:
    memory = 4_000_000
    offsets = OffsetMap(memory, load_factor=1.0)
    tracemalloc.start()
    try:
        for i in range(offsets.max_entries):
            offsets.put(i.to_bytes(8, "big") + b"key", 1_000_000_000 + i)
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert offsets.full and used < memory


def test_records_without_a_key_are_dropped(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    put(log, None, "no key")
    fill(log, keys=4, rounds=10)
    assert harness(tmp_path, log).clean()
    assert all(s.key is not None for s in records(log))


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_cleaned_and_keep_their_codec(tmp_path: Path, codec: int) -> None:
    """Batches of four keys each, compressed: the stale records inside them go, and what a batch
    keeps is written back with its codec."""
    log = compacted_log(tmp_path, segment_bytes=2048)
    latest: dict[str, str] = {}
    for r in range(30):
        values = [(f"k{k}", f"v{r}-{k}" + "." * 40) for k in range(4)]
        plain = build_batch([(k.encode(), v.encode()) for k, v in values], timestamps=[NOW] * 4)
        header = parse_header(plain)
        compressed = replace(header, attributes=header.attributes | codec)
        log.append_as_leader(pack_batch(compressed, compress(codec, plain[HEADER_SIZE:])), 0, now_ms=NOW)
        latest.update(values)
    h = harness(tmp_path, log)
    assert h.clean()
    assert latest_values(log) == latest
    cleaned = [s for s in records(log) if s.offset < h.events[-1]["end_offset"]]
    assert len({s.key for s in cleaned}) == len(cleaned) <= 4, "one record per key where cleaned"
    assert all(s.header.compression == codec for s in cleaned)
    assert h.events[-1]["records_removed"] > 0 and h.events[-1]["compressed_batches_kept"] == 0


def unreadable_batches() -> dict[str, bytes]:
    """Compressed batches the cleaner cannot read, each of one record keyed k0."""
    plain = build_batch([(b"k0", b"zipped")], timestamps=[NOW])
    header = parse_header(plain)
    gzip = replace(header, attributes=header.attributes | GZIP)
    return {
        "not gzip": pack_batch(gzip, plain[HEADER_SIZE:]),  # says gzip, holds plain records
        "damaged records": pack_batch(gzip, compress(GZIP, plain[HEADER_SIZE:] + b"\x00")),
        "too large": pack_batch(gzip, compress(GZIP, bytes(MAX_DECOMPRESSED_BYTES + 1))),
    }


@pytest.mark.parametrize("kind", ["not gzip", "damaged records", "too large"])
def test_a_compressed_batch_that_cannot_be_read_is_kept_whole_and_counted(tmp_path: Path, kind: str) -> None:
    """The broker took it without opening it: the cleaner keeps it as it is, and goes on."""
    log = compacted_log(tmp_path)
    log.append_as_follower(unreadable_batches()[kind])
    fill(log, keys=4, rounds=10)
    h = harness(tmp_path, log)
    assert h.clean()
    assert h.events[-1]["compressed_batches_kept"] == 1
    assert log.read(0, 1 << 20)[:8] == (0).to_bytes(8, "big")


def test_logs_without_compact_are_never_cleaned(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, compact=False, delete=True)
    fill(log, keys=2, rounds=30)
    assert not harness(tmp_path, log).clean()


def test_compact_alone_turns_retention_off_and_compact_delete_keeps_it(tmp_path: Path) -> None:
    kept = compacted_log(tmp_path / "kept", retention_ms=1)
    fill(kept, keys=2, rounds=30)
    assert kept.delete_old_segments(NOW + DAY_MS, kept.log_end_offset) == 0
    both = compacted_log(tmp_path / "both", retention_ms=1, delete=True)
    fill(both, keys=2, rounds=30)
    assert both.delete_old_segments(NOW + DAY_MS, both.log_end_offset) > 0


def test_a_failing_cleaning_marks_the_log_uncleanable_and_the_thread_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=4, rounds=10)
    h = harness(tmp_path, log)

    def broken(*args: object) -> None:
        raise ValueError("disk says no")

    monkeypatch.setattr(h.cleaner.threads[0].cleaner, "_build_offset_map", broken)
    assert not h.clean()
    assert h.events[-1]["kind"] == "log_uncleanable" and "disk says no" in h.events[-1]["error"]
    assert h.cleaner.manager.uncleanable_count == 1
    assert h.cleaner.manager.uncleanable_bytes() > 0
    monkeypatch.undo()
    assert not h.clean()  # left alone until deleted, as Kafka does
    assert h.cleaner.dead_threads() == 0


def test_the_threads_clean_in_the_background_and_stop(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    latest = fill(log, keys=5, rounds=20)
    cleaner = LogCleaner(CleanerConfig(backoff_ms=10), tmp_path, lambda: {TP: log})
    cleaner.start(lambda tp: log.log_end_offset)
    deadline = time.monotonic() + 30
    while cleaner.cleanings == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    cleaner.stop()
    assert cleaner.cleanings >= 1 and latest_values(log) == latest
    assert all(w.thread is None for w in cleaner.threads) and cleaner.time_since_last_run_ms() >= 0


def test_deleting_a_log_aborts_its_cleaning(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=50, rounds=20)
    h = harness(tmp_path, log, io_max_bytes_per_second=20_000.0)  # a slow cleaning
    done = threading.Event()
    thread = threading.Thread(target=lambda: (h.clean(), done.set()))
    thread.start()
    deadline = time.monotonic() + 10
    while TP not in h.cleaner.manager._in_progress and time.monotonic() < deadline:
        time.sleep(0.001)
    h.cleaner.abort(TP, forget=True)
    assert done.is_set() or done.wait(5)
    thread.join()
    assert not h.events  # nothing reported: the cleaning was dropped
    assert not list(log.directory.glob("*.cleaned")) and not list(log.directory.glob("*.swap"))


def test_a_truncation_during_the_cleaning_refuses_the_swap(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    fill(log, keys=4, rounds=10)
    view = log.cleaning_view()
    log.truncate_to(log.log_end_offset - 1)
    assert not log.replace_segments(view.segments[0], view.segments[:1], view.truncations)
    h = harness(tmp_path, log)
    assert h.clean()


def test_header_fields_survive_a_rebuild(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    put(log, "a", "1")
    fill(log, keys=3, rounds=10)
    originals: dict[int, RecordBatchHeader] = {s.offset: s.header for s in records(log)}
    assert harness(tmp_path, log).clean()
    for seen in records(log):
        before = originals[seen.header.base_offset]
        assert (seen.header.base_offset, seen.header.last_offset_delta) == (
            before.base_offset,
            before.last_offset_delta,
        )
        assert seen.header.partition_leader_epoch == before.partition_leader_epoch


def test_the_throttler_sleeps_when_bytes_go_faster_than_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, clock=lambda: now[0], sleep=sleep)
    throttler.maybe_throttle(500)  # within the first 300 ms: not measured yet
    now[0] = 0.5
    throttler.maybe_throttle(1500)  # 2000 bytes in 0.5 s: 1.5 s more are owed
    assert slept == [1.5]
    now[0] += 1.0
    throttler.maybe_throttle(500)  # 500 bytes in 1 s: under the rate
    assert slept == [1.5]
    Throttler(UNLIMITED_IO, clock=lambda: now[0], sleep=sleep).maybe_throttle(10**12)
    assert slept == [1.5]
