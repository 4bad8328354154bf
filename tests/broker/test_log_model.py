"""Random appends, truncations, crashes and reopens against a list of batches: the log must agree,
also on an idempotent producer's last batch."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import Log, LogConfig
from protocol.record_batch import parse_header, with_base_offset_and_epoch
from tests.broker.log_builders import TP, batch, producer_batch, read_all

PID = 77
NOW_MS = time.time_ns() // 1_000_000
"""Producer batches are stamped now, or a reopen would expire the producer."""


@dataclass
class Model:
    """The batches the log should hold, as stored (offsets and epochs stamped)."""

    batches: list[bytes] = field(default_factory=list)
    epoch: int = 0
    """The highest epoch used so far: a leader's epochs only grow."""

    @property
    def log_end_offset(self) -> int:
        return parse_header(self.batches[-1]).next_offset if self.batches else 0

    def append(self, raws: list[bytes], epoch: int) -> None:
        for raw in raws:
            self.batches.append(with_base_offset_and_epoch(raw, self.log_end_offset, epoch))

    def truncate_to(self, offset: int) -> None:
        while self.batches and parse_header(self.batches[-1]).last_offset >= offset:
            self.batches.pop()

    def epochs(self) -> tuple[tuple[int, int], ...]:
        first: dict[int, int] = {}
        for raw in self.batches:
            header = parse_header(raw)
            first.setdefault(header.partition_leader_epoch, header.base_offset)
        return tuple(first.items())

    def last_of_producer(self) -> tuple[int, int] | None:
        """(last sequence, last offset) of the producer's last batch in the log, if any."""
        for raw in reversed(self.batches):
            header = parse_header(raw)
            if header.producer_id == PID:
                return header.base_sequence + header.last_offset_delta, header.last_offset
        return None

    def records(self) -> list[tuple[int, int]]:
        """(offset, timestamp) of every record: batch() stamps record i with base timestamp + i."""
        out = []
        for raw in self.batches:
            header = parse_header(raw)
            out += [(header.base_offset + i, header.base_timestamp + i) for i in range(header.records_count)]
        return out


appends = st.tuples(
    st.just("append"),
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 80), st.integers(0, 1000)), min_size=1, max_size=3),
    st.booleans(),
)
produces = st.tuples(st.just("produce"), st.integers(1, 4))
"""A batch of that many records from an idempotent producer, at its next sequence."""
truncations = st.tuples(st.just("truncate"), st.floats(0, 1.1))
reopens = st.tuples(st.just("reopen"), st.booleans(), st.integers(0, 40))
"""(flush first, bytes torn off the last segment while closed: a crash mid-write)"""
ops = st.lists(st.one_of(appends, appends, produces, truncations, reopens), max_size=14)
configs = st.builds(LogConfig, segment_bytes=st.integers(150, 1200), index_interval_bytes=st.integers(0, 400))


def _tear_last_segment(directory: Path, model: Model, cut: int) -> None:
    """Cut up to ``cut`` bytes from the end of the last batch's file, never a whole batch."""
    if not model.batches or cut == 0:
        return
    last = max(directory.glob("*.log"))
    size = last.stat().st_size
    cut = min(cut, len(model.batches[-1]) - 1)
    if size == 0:
        return
    os.truncate(last, size - cut)
    model.batches.pop()


def _check(log: Log, model: Model, targets: list[int]) -> None:
    assert log.log_end_offset == model.log_end_offset
    assert read_all(log) == b"".join(model.batches)
    assert log.epoch_entries() == model.epochs()
    for raw in model.batches[:: max(1, len(model.batches) // 4)]:
        header = parse_header(raw)
        assert log.read(header.last_offset, 1 << 20).startswith(raw)
    records = model.records()
    for target in targets:
        expected = next(((o, t) for o, t in records if t >= target), None)
        assert log.offset_for_timestamp(target) == expected
    entry = log.producer_entry(PID)
    last = model.last_of_producer()
    assert (entry.batches[-1].last_seq, entry.batches[-1].last_offset) == last if entry else last is None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, ops, st.lists(st.integers(-1, 1010), min_size=1, max_size=3))
def test_the_log_behaves_like_a_list_of_batches(config: LogConfig, script: list, targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / TP
        model = Model()
        log = Log.open(directory, config)
        for op, *args in script:
            if op == "append":
                specs, bump = args
                model.epoch += bump
                raws = [batch(n, value_size=size, timestamp=ts) for n, size, ts in specs]
                log.append_as_leader(b"".join(raws), model.epoch)
                model.append(raws, model.epoch)
            elif op == "produce":
                last = model.last_of_producer()
                raw = producer_batch(PID, 0, last[0] + 1 if last else 0, args[0], timestamp=NOW_MS)
                log.append_as_leader(raw, model.epoch)
                model.append([raw], model.epoch)
            elif op == "truncate":
                target = int(args[0] * (model.log_end_offset + 1))
                model.truncate_to(target)
                assert log.truncate_to(target) == model.log_end_offset
            else:
                flush, cut = args
                if flush:
                    log.flush()
                log.close()
                _tear_last_segment(directory, model, cut)
                log = Log.open(directory, config, recovery_point=log.recovery_point)
            _check(log, model, targets)
        log.close()
