"""Opening a log after a crash: invalid bytes cut, later segments dropped, indexes and epochs rebuilt."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from broker.log import Log, LogConfig
from tests.broker.log_builders import TP, batch, count_preads, read_all, segment_files, spans

ONE = batch(3, value_size=100)  # offsets 0-2, 3-5, ... one batch per append
CONFIG = LogConfig(segment_bytes=4 * len(ONE), index_interval_bytes=len(ONE))


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, /, **fields: Any) -> None:
        self.seen.append((kind, fields))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.seen]


def written(tmp_path: Path, batches: int = 10, *, epochs: tuple[int, ...] = (0,)) -> Path:
    """A log of ``batches`` batches of ONE (four per segment), closed without a flush, as after a crash."""
    log = Log.open(tmp_path / TP, CONFIG)
    for i in range(batches):
        log.append_as_leader(ONE, epochs[i * len(epochs) // batches])
    log.close()
    return tmp_path / TP


def segment(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def reopen(directory: Path, events: Events, recovery_point: int = 0) -> Log:
    return Log.open(directory, CONFIG, recovery_point=recovery_point, emit=events)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def assert_truncation_reported(
    caplog: pytest.LogCaptureFixture, events: Events, path: Path, position: int, log_end_offset: int
) -> str:
    (kind, fields) = events.seen[-1]
    assert kind == "log_recovery_truncated"
    assert fields["topic_partition"] == TP
    assert (fields["path"], fields["position"], fields["log_end_offset"]) == (
        str(path),
        position,
        log_end_offset,
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(path.name in w and f"byte {position}" in w and fields["reason"] in w for w in warnings), (
        warnings
    )
    return fields["reason"]


def test_a_torn_last_batch_is_cut_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = written(tmp_path, 10)  # segments 0, 12, 24; the last holds batches 24-26 and 27-29
    last = segment(directory, 24)
    os.truncate(last, len(ONE) + 100)
    events = Events()
    log = reopen(directory, events)
    assert log.log_end_offset == 27
    assert last.stat().st_size == len(ONE)
    reason = assert_truncation_reported(caplog, events, last, len(ONE), 27)
    assert "runs past the end" in reason
    assert spans(read_all(log))[-1] == (24, 26)
    assert log.append_as_leader(ONE, 0).first_offset == 27


def test_a_flipped_byte_in_a_middle_batch_ends_the_log_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = written(tmp_path, 10, epochs=(1, 2))
    middle = segment(directory, 12)
    data = bytearray(middle.read_bytes())
    data[2 * len(ONE) + 100] ^= 0x10  # the third batch of the middle segment: offsets 18-20
    middle.write_bytes(bytes(data))
    events = Events()
    log = reopen(directory, events)
    assert log.log_end_offset == 18
    assert segment_files(directory) == [segment(directory, 0).name, middle.name]
    assert not segment(directory, 24, ".index").exists()
    reason = assert_truncation_reported(caplog, events, middle, 2 * len(ONE), 18)
    assert "CRC mismatch" in reason
    assert spans(read_all(log)) == [(i, i + 2) for i in range(0, 18, 3)]
    assert log.epoch_entries() == ((1, 0), (2, 15))


def test_garbage_after_the_last_batch_is_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = written(tmp_path, 6)
    last = segment(directory, 12)
    with last.open("ab") as f:
        f.write(b"\x00" * 100)  # a preallocated or half-written tail
    events = Events()
    log = reopen(directory, events)
    assert log.log_end_offset == 18
    assert last.stat().st_size == 2 * len(ONE)
    assert "bad magic 0" in assert_truncation_reported(caplog, events, last, 2 * len(ONE), 18)


def test_offsets_that_go_back_are_invalid(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = written(tmp_path, 2)
    first = segment(directory, 0)
    first.write_bytes(first.read_bytes() + ONE)  # a batch claiming offsets 0-2 again
    events = Events()
    log = reopen(directory, events)
    assert log.log_end_offset == 6
    assert "below 6" in assert_truncation_reported(caplog, events, first, 2 * len(ONE), 6)


def test_a_clean_log_reports_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = written(tmp_path, 10)
    events = Events()
    log = reopen(directory, events)
    assert log.log_end_offset == 30 and events.seen == []
    assert not warnings(caplog)


def _flushed(tmp_path: Path, batches: int = 10) -> tuple[Path, int]:
    log = Log.open(tmp_path / TP, CONFIG)
    for _ in range(batches):
        log.append_as_leader(ONE, 0)
    log.flush()
    log.close()
    return tmp_path / TP, log.recovery_point


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.unlink(), id="missing"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-3]), id="partial-entry"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes() + bytes(8)), id="zero-entry"),
        pytest.param(lambda p: p.write_bytes(b"\x7f" * 16), id="beyond-the-segment"),
    ],
)
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_damaged_index_of_a_flushed_segment_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any, suffix: str
) -> None:
    directory, recovery_point = _flushed(tmp_path)
    index = segment(directory, 12, suffix)
    original = index.read_bytes()
    assert original  # the segment has entries to lose
    damage(index)
    events = Events()
    log = reopen(directory, events, recovery_point)
    assert log.log_end_offset == 30
    assert index.read_bytes() == original
    assert events.kinds() == ["log_index_rebuilt"]
    assert events.seen[0][1]["path"] == str(segment(directory, 12))
    assert any(
        "rebuilt the indexes" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )
    assert spans(log.read(19, 1 << 20)) == [(18, 20), (21, 23)]


def test_a_clean_shutdown_reopens_reading_only_the_tails_after_the_last_index_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LogConfig(segment_bytes=64 * 1024)
    log = Log.open(tmp_path / TP, config)
    for _ in range(40):
        log.append_as_leader(ONE * 50, 0)
    log.flush()
    log.close()
    assert log.segment_count == 14 and log.recovery_point == 6000  # three appends per segment
    read_bytes = count_preads(monkeypatch)
    log = Log.open(tmp_path / TP, config, recovery_point=6000)
    assert log.log_end_offset == 6000 and log.recovery_point == 6000
    assert sum(read_bytes) < 14 * (config.index_interval_bytes + len(ONE)) < log.size_bytes / 10


def test_recovery_checks_from_the_segment_holding_the_recovery_point(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = written(tmp_path, 10)
    first = segment(directory, 0)
    data = bytearray(first.read_bytes())
    data[200] ^= 1  # in a flushed segment: trusted, as in Kafka (its CRC is checked by consumers)
    first.write_bytes(bytes(data))
    events = Events()
    log = reopen(directory, events, recovery_point=13)
    assert log.log_end_offset == 30 and events.seen == []
    log.close()
    log = reopen(directory, events, recovery_point=0)
    assert log.log_end_offset == 0
    assert_truncation_reported(caplog, events, first, 0, 0)


def test_a_corrupt_epoch_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory, recovery_point = _flushed(tmp_path)
    log = reopen(directory, Events(), recovery_point)
    log.append_as_leader(ONE, 3)
    log.append_as_leader(ONE, 5)
    log.flush()
    log.close()
    assert log.epoch_entries() == ((0, 0), (3, 30), (5, 33))
    (directory / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n3 thirty\n")
    log = reopen(directory, Events(), log.recovery_point)
    assert log.epoch_entries() == ((0, 0), (3, 30), (5, 33))
    assert any(
        "leader-epoch-checkpoint" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n3 30\n5 33\n"


def test_a_missing_epoch_checkpoint_is_rebuilt_too(tmp_path: Path) -> None:
    directory, recovery_point = _flushed(tmp_path)
    (directory / "leader-epoch-checkpoint").unlink()
    assert reopen(directory, Events(), recovery_point).epoch_entries() == ((0, 0),)
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_a_new_log_writes_an_empty_epoch_checkpoint(tmp_path: Path) -> None:
    Log.open(tmp_path / TP, CONFIG)
    assert (tmp_path / TP / "leader-epoch-checkpoint").read_text() == "0\n0\n"


def test_a_log_ending_below_its_start_offset_starts_over_at_it(tmp_path: Path) -> None:
    directory = written(tmp_path, 2)
    log = Log.open(directory, CONFIG, log_start_offset=50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert segment_files(directory) == [segment(directory, 50).name]


def test_the_log_start_offset_from_a_checkpoint_is_kept(tmp_path: Path) -> None:
    directory = written(tmp_path, 6)
    log = Log.open(directory, CONFIG, log_start_offset=4)
    assert (log.log_start_offset, log.log_end_offset) == (4, 18)
    assert spans(log.read(4, 1 << 20))[0] == (3, 5)


def test_stray_index_files_are_deleted_and_a_new_directory_created(tmp_path: Path) -> None:
    directory = tmp_path / "deep" / TP
    Log.open(directory, CONFIG).close()
    segment(directory, 77, ".index").write_bytes(bytes(8))
    log = Log.open(directory, CONFIG)
    assert not segment(directory, 77, ".index").exists()
    assert log.log_end_offset == 0
