"""The leader epoch cache: Kafka's LeaderEpochFileCache rules, table by table, and its checkpoint file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.log import epoch_cache
from broker.log.epoch_cache import (
    CHECKPOINT_FILE,
    CorruptEpochCheckpoint,
    EpochEntry,
    LeaderEpochCache,
    read_checkpoint,
    write_checkpoint,
)


def entries(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(*pair) for pair in pairs)


@pytest.mark.parametrize(
    ("before", "epoch", "start", "after"),
    [
        pytest.param((), 0, 0, ((0, 0),), id="first"),
        pytest.param(((1, 0),), 2, 10, ((1, 0), (2, 10)), id="next-epoch"),
        pytest.param(((1, 0),), 5, 10, ((1, 0), (5, 10)), id="epochs-may-skip"),
        pytest.param(((1, 0), (2, 10)), 2, 15, ((1, 0), (2, 10)), id="latest-again-later"),
        pytest.param(((1, 0), (2, 10)), 2, 5, ((1, 0), (2, 5)), id="latest-again-earlier"),
        pytest.param(((1, 0), (2, 10)), -1, 20, ((1, 0), (2, 10)), id="negative-ignored"),
        pytest.param(((1, 0), (2, 10), (4, 20)), 3, 30, ((1, 0), (2, 10), (3, 30)), id="lower-epoch-drops"),
        pytest.param(((1, 0), (2, 10), (4, 20)), 5, 15, ((1, 0), (2, 10), (5, 15)), id="lower-offset-drops"),
        pytest.param(((1, 0), (2, 10)), 1, 40, ((1, 40),), id="older-epoch-replaces-all"),
        pytest.param(((3, 10),), 4, 10, ((4, 10),), id="same-start-replaces"),
    ],
)
def test_assign(before: tuple, epoch: int, start: int, after: tuple) -> None:
    assert epoch_cache.assign(entries(*before), epoch, start) == entries(*after)


CACHE = entries((1, 0), (2, 10), (4, 20))


@pytest.mark.parametrize(
    ("cache", "requested", "answer"),
    [
        pytest.param(CACHE, -1, (-1, -1), id="undefined"),
        pytest.param((), 3, (-1, -1), id="empty-cache"),
        pytest.param(CACHE, 4, (4, 35), id="latest-ends-at-the-log-end"),
        pytest.param(CACHE, 5, (-1, -1), id="above-latest"),
        pytest.param(CACHE, 1, (1, 10), id="ends-where-the-next-starts"),
        pytest.param(CACHE, 2, (2, 20), id="middle"),
        pytest.param(CACHE, 3, (2, 20), id="unknown-between-answers-the-one-below"),
        pytest.param(CACHE, 0, (0, 0), id="below-the-first"),
    ],
)
def test_end_offset_for(cache: tuple, requested: int, answer: tuple[int, int]) -> None:
    assert epoch_cache.end_offset_for(cache, requested, log_end_offset=35) == answer


@pytest.mark.parametrize(
    ("end", "after"),
    [
        (25, ((1, 0), (2, 10), (4, 20))),
        (20, ((1, 0), (2, 10))),
        (11, ((1, 0), (2, 10))),
        (10, ((1, 0),)),
        (0, ()),
    ],
)
def test_truncate_from_end(end: int, after: tuple) -> None:
    assert epoch_cache.truncate_from_end(CACHE, end) == entries(*after)


@pytest.mark.parametrize(
    ("start", "after"),
    [
        (0, ((1, 0), (2, 10), (4, 20))),
        (5, ((1, 5), (2, 10), (4, 20))),
        (10, ((2, 10), (4, 20))),
        (15, ((2, 15), (4, 20))),
        (99, ((4, 99),)),
    ],
)
def test_truncate_from_start(start: int, after: tuple) -> None:
    assert epoch_cache.truncate_from_start(CACHE, start) == entries(*after)


def test_truncate_from_start_before_every_epoch_changes_nothing() -> None:
    assert epoch_cache.truncate_from_start(entries((3, 50)), 10) == entries((3, 50))


@pytest.mark.parametrize(("offset", "epoch"), [(0, 1), (9, 1), (10, 2), (19, 2), (20, 4), (10**6, 4)])
def test_epoch_for_offset(offset: int, epoch: int) -> None:
    assert epoch_cache.epoch_for_offset(CACHE, offset) == epoch
    assert epoch_cache.epoch_for_offset(entries((3, 50)), 10) == -1


# ---------------------------------------------------------------- the file


def test_every_change_is_written_in_kafkas_format(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    cache = LeaderEpochCache(path)
    assert not path.exists()  # written on the first change (or by save)
    cache.assign(1, 0)
    cache.assign(3, 17)
    assert path.read_text() == "0\n2\n1 0\n3 17\n"
    cache.truncate_from_end(17)
    assert path.read_text() == "0\n1\n1 0\n"
    cache.truncate_from_start(5)
    assert path.read_text() == "0\n1\n1 5\n"
    assert LeaderEpochCache(path).entries == entries((1, 5))
    assert LeaderEpochCache(path).trusted
    cache.clear()
    assert path.read_text() == "0\n0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_FILE]


def test_a_file_written_by_kafka_is_read(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n0 0\n2 1543\n7 90210\n")
    assert read_checkpoint(tmp_path / CHECKPOINT_FILE) == entries((0, 0), (2, 1543), (7, 90210))


def test_round_trip(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "f", CACHE)
    assert read_checkpoint(tmp_path / "f") == CACHE
    assert read_checkpoint(tmp_path / "absent") is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("1\n0\n", id="unknown-version"),
        pytest.param("0\n2\n1 0\n", id="fewer-entries"),
        pytest.param("0\n1\n1\n", id="missing-offset"),
        pytest.param("0\n1\n1 x\n", id="non-numeric"),
        pytest.param("0\n2\n2 0\n1 5\n", id="epochs-go-back"),
        pytest.param("0\n2\n1 5\n2 5\n", id="offsets-repeat"),
        pytest.param("0\n1\n-1 0\n", id="negative"),
    ],
)
def test_a_corrupt_file_is_refused_and_the_cache_starts_empty(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / CHECKPOINT_FILE
    path.write_text(text)
    with pytest.raises(CorruptEpochCheckpoint):
        read_checkpoint(path)
    cache = LeaderEpochCache(path)
    assert (cache.entries, cache.trusted) == ((), False)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert path.read_text() == text  # until the log has rebuilt the epochs from its batches
    cache.save()
    assert path.read_text() == "0\n0\n"


def test_a_missing_file_is_not_trusted(tmp_path: Path) -> None:
    assert not LeaderEpochCache(tmp_path / CHECKPOINT_FILE).trusted


def test_non_utf8_bytes_are_corrupt(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"0\n1\n\xff 0\n")
    with pytest.raises(CorruptEpochCheckpoint):
        read_checkpoint(tmp_path / CHECKPOINT_FILE)
