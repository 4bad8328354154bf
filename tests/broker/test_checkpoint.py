"""Offset checkpoint files: Kafka's exact text, corrupt files refused, and writes that never tear."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from zkstore.znodes import TopicPartition

NAME = "replication-offset-checkpoint"


def offsets(*entries: tuple[str, int, int]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, partition): offset for topic, partition, offset in entries}


def checkpoint_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / NAME
    path.write_text(text)
    return path


def test_round_trip(tmp_path: Path) -> None:
    written = offsets(("orders", 0, 5), ("orders", 1, 0), ("__consumer_offsets", 49, 1234567890123))
    write_offsets(tmp_path / NAME, written)
    assert read_offsets(tmp_path / NAME) == written


def test_text_is_kafkas_format_sorted_by_partition(tmp_path: Path) -> None:
    """A Kafka broker reads the file this one writes (and vice versa) when a log dir changes hands."""
    write_offsets(tmp_path / NAME, offsets(("topic", 1, 7), ("topic", 0, 5)))
    assert (tmp_path / NAME).read_text() == "0\n2\ntopic 0 5\ntopic 1 7\n"


def test_empty_mapping_writes_version_and_zero(tmp_path: Path) -> None:
    write_offsets(tmp_path / NAME, {})
    assert (tmp_path / NAME).read_text() == "0\n0\n"
    assert read_offsets(tmp_path / NAME) == {}


def test_absent_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_offsets(tmp_path / NAME) == {}


def test_a_file_written_by_kafka_is_read(tmp_path: Path) -> None:
    path = checkpoint_file(tmp_path, "0\n3\na 0 10\nb 2 0\nc.d-e_f 11 99\n")
    assert read_offsets(path) == offsets(("a", 0, 10), ("b", 2, 0), ("c.d-e_f", 11, 99))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("1\n1\nt 0 5\n", id="unknown-version"),
        pytest.param("x\n1\nt 0 5\n", id="non-numeric-version"),
        pytest.param("0\n", id="no-count"),
        pytest.param("0\ntwo\nt 0 5\n", id="non-numeric-count"),
        pytest.param("0\n2\nt 0 5\n", id="fewer-entries-than-count"),
        pytest.param("0\n1\nt 0\n", id="line-missing-offset"),
        pytest.param("0\n1\nt zero 5\n", id="non-numeric-partition"),
        pytest.param("0\n1\nt 0 5 6\n", id="extra-field"),
    ],
)
def test_corrupt_file_raises(tmp_path: Path, text: str) -> None:
    with pytest.raises(CorruptCheckpoint):
        read_offsets(checkpoint_file(tmp_path, text))


def test_more_entries_than_count_raises(tmp_path: Path) -> None:
    with pytest.raises(CorruptCheckpoint):
        read_offsets(checkpoint_file(tmp_path, "0\n1\nt 0 5\nt 1 6\n"))


def test_corrupt_checkpoint_is_a_value_error() -> None:
    """Callers that already handle ValueError for bad numbers keep working."""
    assert issubclass(CorruptCheckpoint, ValueError)


def test_write_replaces_the_file_and_leaves_no_temporary_behind(tmp_path: Path) -> None:
    path = tmp_path / NAME
    write_offsets(path, offsets(("t", 0, 1)))
    write_offsets(path, offsets(("t", 0, 2), ("t", 1, 3)))
    assert read_offsets(path) == offsets(("t", 0, 2), ("t", 1, 3))
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


def test_overwrite_goes_through_a_rename(tmp_path: Path) -> None:
    """A reader holding the old file keeps the old bytes: the new content arrives as a new inode."""
    path = tmp_path / NAME
    write_offsets(path, offsets(("t", 0, 1)))
    with path.open() as old:
        write_offsets(path, offsets(("t", 0, 2)))
        assert old.read() == "0\n1\nt 0 1\n"
    assert path.read_text() == "0\n1\nt 0 2\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_failed_write_keeps_the_old_content(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    path = directory / NAME
    write_offsets(path, offsets(("t", 0, 1)))
    directory.chmod(0o500)
    try:
        with pytest.raises(PermissionError):
            write_offsets(path, offsets(("t", 0, 2)))
    finally:
        directory.chmod(0o700)
    assert read_offsets(path) == offsets(("t", 0, 1))
    assert sorted(p.name for p in directory.iterdir()) == [NAME]


def test_write_failing_before_the_rename_keeps_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error while the new content is being flushed must not cost the previous checkpoint."""
    path = tmp_path / NAME
    write_offsets(path, offsets(("t", 0, 1)))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "simulated I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="simulated"):
        write_offsets(path, offsets(("t", 0, 2)))
    monkeypatch.undo()
    assert read_offsets(path) == offsets(("t", 0, 1))
