"""Offset and time indexes: Kafka's entry layout, lookups, truncation, and what counts as corrupt."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.index import CorruptIndex, OffsetIndex, TimeIndex

BASE = 1000


def offset_index(tmp_path: Path, *entries: tuple[int, int]) -> OffsetIndex:
    index = OffsetIndex(tmp_path / "x.index", BASE)
    for offset, position in entries:
        index.append(offset, position)
    index.write()
    return index


def time_index(tmp_path: Path, *entries: tuple[int, int]) -> TimeIndex:
    index = TimeIndex(tmp_path / "x.timeindex", BASE)
    for timestamp, offset in entries:
        index.maybe_append(timestamp, offset)
    index.write()
    return index


def test_offset_entries_are_relative_int32_pairs_big_endian(tmp_path: Path) -> None:
    offset_index(tmp_path, (1004, 300), (1010, 900))
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 4, 300, 10, 900)


def test_time_entries_are_int64_timestamp_and_relative_int32_offset(tmp_path: Path) -> None:
    time_index(tmp_path, (5000, 1004), (4000, 1006), (7000, 1010))  # 4000 does not grow: skipped
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 5000, 4, 7000, 10)


def test_entries_reach_the_file_in_one_write_per_call(tmp_path: Path) -> None:
    index = offset_index(tmp_path, (1001, 10))
    index.append(1002, 20)
    index.append(1003, 30)
    assert len((tmp_path / "x.index").read_bytes()) == 8
    index.write()
    assert struct.unpack(">6i", (tmp_path / "x.index").read_bytes()) == (1, 10, 2, 20, 3, 30)


@pytest.mark.parametrize(
    ("offset", "position"),
    [(999, 0), (1000, 0), (1003, 0), (1004, 300), (1009, 300), (1010, 900), (10**9, 900)],
)
def test_offset_lookup_gives_the_last_entry_at_or_below(tmp_path: Path, offset: int, position: int) -> None:
    assert offset_index(tmp_path, (1004, 300), (1010, 900)).lookup(offset) == position


@pytest.mark.parametrize(
    ("timestamp", "offset"), [(4999, None), (5000, None), (5001, 1004), (7000, 1004), (7001, 1010)]
)
def test_time_lookup_gives_the_last_entry_strictly_older(
    tmp_path: Path, timestamp: int, offset: int | None
) -> None:
    assert time_index(tmp_path, (5000, 1004), (7000, 1010)).lookup_below(timestamp) == offset


def test_truncation_drops_entries_in_memory_and_on_disk(tmp_path: Path) -> None:
    offsets = offset_index(tmp_path, (1004, 300), (1010, 900), (1020, 1500))
    offsets.truncate_to_position(900)
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">ii", 4, 300)
    assert offsets.last() == (1004, 300) and offsets.lookup(1030) == 300
    times = time_index(tmp_path, (5000, 1004), (7000, 1010), (8000, 1020))
    times.truncate_to_offset(1010)
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qi", 5000, 4)
    assert times.last() == (5000, 1004)


def test_a_written_index_loads_back(tmp_path: Path) -> None:
    offset_index(tmp_path, (1004, 300), (1010, 900))
    loaded = OffsetIndex(tmp_path / "x.index", BASE)
    loaded.load(segment_size=1000)
    assert (len(loaded), loaded.last(), loaded.lookup(1005)) == (2, (1010, 900), 300)
    time_index(tmp_path, (5000, 1004), (7000, 1010))
    times = TimeIndex(tmp_path / "x.timeindex", BASE)
    times.load()
    assert (len(times), times.last()) == (2, (7000, 1010))


@pytest.mark.parametrize(
    ("data", "segment_size"),
    [
        pytest.param(struct.pack(">iii", 1, 2, 3), 1000, id="partial-entry"),
        pytest.param(struct.pack(">iiii", 4, 300, 4, 400), 1000, id="offsets-repeat"),
        pytest.param(struct.pack(">iiii", 4, 300, 5, 300), 1000, id="positions-repeat"),
        pytest.param(struct.pack(">iiii", 4, 300, 5, 200), 1000, id="positions-go-back"),
        pytest.param(struct.pack(">ii", 4, 1000), 1000, id="position-past-the-segment"),
        pytest.param(struct.pack(">ii", -1, 0), 1000, id="negative-offset"),
    ],
)
def test_a_corrupt_offset_index_is_refused(tmp_path: Path, data: bytes, segment_size: int) -> None:
    (tmp_path / "x.index").write_bytes(data)
    with pytest.raises(CorruptIndex):
        OffsetIndex(tmp_path / "x.index", BASE).load(segment_size)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(struct.pack(">qi", 1, 1)[:-1], id="partial-entry"),
        pytest.param(struct.pack(">qiqi", 5, 1, 5, 2), id="timestamps-repeat"),
        pytest.param(struct.pack(">qiqi", 5, 3, 6, 2), id="offsets-go-back"),
        pytest.param(struct.pack(">qi", 5, -3), id="negative-offset"),
    ],
)
def test_a_corrupt_time_index_is_refused(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "x.timeindex").write_bytes(data)
    with pytest.raises(CorruptIndex):
        TimeIndex(tmp_path / "x.timeindex", BASE).load()


def test_a_missing_index_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(CorruptIndex, match="missing"):
        OffsetIndex(tmp_path / "x.index", BASE).load(100)
    with pytest.raises(CorruptIndex, match="missing"):
        TimeIndex(tmp_path / "x.timeindex", BASE).load()
