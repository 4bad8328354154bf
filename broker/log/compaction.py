"""Cleaning one compacted log: Kafka's Cleaner, run by a thread of ``broker.cleaner``.

A cleaning covers the log from its start up to an end the offset map decides. The map is built over
the dirty section [first dirty offset, upper bound) (the bound: the first uncleanable offset, which
``broker.cleaner`` picks), key by key, until it fills; the cleaning ends after the last offset it
covers. Then every segment before that end is copied, in groups of consecutive segments that fit
``segment.bytes`` together, each group into one ``.cleaned`` segment swapped in for the group
(``Log.replace_segments``). A record stays if it is the latest of its key (or newer than anything
mapped); a tombstone and a transaction marker whose transaction has nothing left stay until their
delete horizon (``broker.log.batch_filter``); an aborted transaction's records go
(``broker.log.cleaned_txns``); the last batch of each producer and of the round stays, emptied if need
be. The active segment is never touched.

Files are read through descriptors of the cleaner's own, so a segment that the log deletes meanwhile
(retention, truncation) is still read whole, and the swap then refuses: the cleaning is aborted.

What the cleaning reads of the log is taken once, as a :class:`CleaningPlan` (paths, sizes, offsets,
aborted transactions, producers' last batches, settings), and the swap is a callback: so the same
:meth:`Cleaner.run` cleans in the broker (:meth:`Cleaner.clean`) or in a worker process
(``broker.cleaner.worker``) that hands each ``.cleaned`` segment back to the broker to swap in.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from broker.log.batch_filter import Copied, copy_batch, records_of
from broker.log.cleaned_txns import CleanedTransactions
from broker.log.cleaning_view import CleaningView, LastRecord
from broker.log.log import Log
from broker.log.offset_map import OffsetMap
from broker.log.segment import BatchInfo, Segment, walk
from broker.log.swap import CLEANED_SUFFIX
from broker.log.txn_index import AbortedTxn, collect_aborted, search_entries
from protocol.record_batch import Record, RecordBatchHeader

__all__ = [
    "Cleaner",
    "CleanerStats",
    "CleaningAborted",
    "CleaningPlan",
    "SegmentFile",
    "Swap",
    "group_by_size",
    "plan_cleaning",
    "segments_between",
    "swapper",
]

INT32_MAX = 2**31 - 1


class CleaningAborted(Exception):
    """The log changed under the cleaning (truncated, deleted, closed), or the cleaner is stopping."""


@dataclass
class CleanerStats:
    """One cleaning's figures (Kafka's CleanerStats): what the metrics and the ``log_cleaned`` event say."""

    started: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    ended: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    records_read: int = 0
    records_written: int = 0
    invalid_records: int = 0
    """Records without a key: a compacted log drops them."""
    compressed_batches_kept: int = 0
    """Compressed batches copied whole: their records could not be read (``records_of``)."""
    buffer_utilization: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.ended - self.started, 0.0)

    @property
    def elapsed_index_s(self) -> float:
        return max(self.map_done - self.started, 0.0)


class _Spanning(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...


S = TypeVar("S", bound=_Spanning)


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A segment as a cleaning reads it: its file, its offsets and size when the plan was taken, and the
    entries of its transaction index. Picklable, for a worker process."""

    path: Path
    base_offset: int
    size: int
    next_offset: int
    aborted: tuple[AbortedTxn, ...]

    def collect(self, start: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """The search of ``TransactionIndex.collect`` over :attr:`aborted`."""
        return search_entries(self.aborted, start, upper_bound)


@dataclass(frozen=True)
class CleaningPlan:
    """Everything a cleaning reads of its log, taken at one instant (``plan_cleaning``)."""

    topic_partition: str
    directory: Path
    segments: tuple[SegmentFile, ...]
    """The last one is the active segment: never cleaned, its aborted transactions still count."""
    first_dirty: int
    upper_bound: int
    """At most the active segment's base offset."""
    map_start_position: int
    """Where ``first_dirty``'s batch is in its segment (the log's offset index said)."""
    last_records: Mapping[int, LastRecord]
    now_ms: int
    segment_bytes: int
    index_interval_bytes: int
    delete_retention_ms: int


Swap = Callable[[Segment, Sequence[SegmentFile]], bool]
"""Swaps a sealed ``.cleaned`` segment in for a group of the plan's segments; False if the log refused."""


def plan_cleaning(
    log: Log, first_dirty: int, upper_bound: int, now_ms: int
) -> tuple[CleaningPlan, CleaningView]:
    """The plan of a cleaning of ``log`` over [``first_dirty``, ``upper_bound``), and the view it was
    taken from (whose truncation count the swaps check)."""
    view = log.cleaning_view()
    upper_bound = min(upper_bound, view.active_base)
    dirty = segments_between(view.segments, first_dirty, upper_bound)
    files = tuple(
        SegmentFile(s.path, s.base_offset, s.size, s.next_offset, s.txn_index.entries) for s in view.segments
    )
    config = log.config
    plan = CleaningPlan(
        f"{log.topic_partition}",
        log.directory,
        files,
        first_dirty,
        upper_bound,
        dirty[0].offset_index.lookup(first_dirty) if dirty else 0,
        dict(view.last_records),
        now_ms,
        config.segment_bytes,
        config.index_interval_bytes,
        config.delete_retention_ms,
    )
    return plan, view


def swapper(log: Log, view: CleaningView) -> Swap:
    """The swap into ``log`` of a group of the segments of a plan taken from ``view``."""
    by_base = {s.base_offset: s for s in view.segments}

    def swap(cleaned: Segment, group: Sequence[SegmentFile]) -> bool:
        return log.replace_segments(cleaned, [by_base[s.base_offset] for s in group], view.truncations)

    return swap


def segments_between(segments: Sequence[S], start: int, end: int) -> list[S]:
    """Kafka's ``logSegments(start, end)``: the segment holding ``start`` and the later ones below ``end``."""
    if start >= end:
        return []
    first = max(bisect_right(segments, start, key=lambda s: s.base_offset) - 1, 0)
    return [s for s in segments[first:] if s.base_offset < end]


def aborted_between(segments: Sequence[SegmentFile], start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [``start``, ``end``) (Kafka's collectAbortedTransactions)."""
    first = max(bisect_right(segments, start, key=lambda s: s.base_offset) - 1, 0)
    return collect_aborted(segments[first:], start, end)


def group_by_size(segments: Sequence[S], max_size: int, first_uncleanable: int) -> list[list[S]]:
    """Consecutive segments whose sizes add up to at most ``max_size`` (segment.bytes) and whose offsets
    fit one segment's int32 relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[list[S]] = []
    rest = list(segments)
    while rest:
        group, size = [rest[0]], rest[0].size
        rest = rest[1:]
        while rest and size + rest[0].size <= max_size:
            last = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable - 1
            if rest[0].size and last - group[0].base_offset > INT32_MAX:
                break
            group.append(rest[0])
            size += rest[0].size
            rest = rest[1:]
        groups.append(group)
    return groups


class Cleaner:
    """One cleaner thread's worker: its offset map and I/O buffer size, and two callbacks, ``throttle``
    (bytes read or written, for log.cleaner.io.max.bytes.per.second) and ``check_done`` (raises
    CleaningAborted when the cleaning must stop)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        io_buffer_size: int = 512 * 1024,
        throttle: Callable[[int], None] = lambda n: None,
        check_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.map = offset_map
        self.io_buffer_size = max(io_buffer_size, 4096)
        self.throttle = throttle
        self.check_done = check_done

    def clean(self, log: Log, first_dirty: int, upper_bound: int, now_ms: int) -> tuple[int, CleanerStats]:
        """Clean ``log`` from its start to where the map filled (at most ``upper_bound``); returns the
        next dirty offset (the new checkpoint) and the figures. CleaningAborted if the log changed."""
        plan, view = plan_cleaning(log, first_dirty, upper_bound, now_ms)
        return self.run(plan, swapper(log, view))

    def run(self, plan: CleaningPlan, swap: Swap) -> tuple[int, CleanerStats]:
        """Clean what ``plan`` describes, each group's ``.cleaned`` segment handed to ``swap``."""
        stats = CleanerStats()
        self._build_offset_map(plan, stats)
        end = max(self.map.latest_offset + 1, plan.first_dirty)
        stats.map_done = time.monotonic()
        txns = CleanedTransactions()
        cleanable = [s for s in plan.segments[:-1] if s.base_offset < end]
        for group in group_by_size(cleanable, plan.segment_bytes, plan.upper_bound):
            self._clean_group(plan, group, txns, swap, stats)
        stats.buffer_utilization = self.map.utilization
        stats.ended = time.monotonic()
        return end, stats

    @contextmanager
    def _reading(self, segment: SegmentFile) -> Iterator[int]:
        """A descriptor of the cleaner's own on ``segment``'s file (see the module docstring)."""
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            raise CleaningAborted(f"{segment.path.name} was deleted") from None
        try:
            yield fd
        finally:
            os.close(fd)

    def _batches(self, segment: SegmentFile, start: int) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        with self._reading(segment) as fd:
            for _, header, batch in walk(fd, start, segment.size, whole=True, chunk=self.io_buffer_size):
                self.check_done()
                self.throttle(header.size)
                yield header, batch

    # -- the offset map

    def _build_offset_map(self, plan: CleaningPlan, stats: CleanerStats) -> None:
        self.map.clear()
        start, end = plan.first_dirty, plan.upper_bound
        dirty = segments_between(plan.segments, start, end)
        txns = CleanedTransactions(aborted_between(plan.segments, start, end))
        positions = [plan.map_start_position, *(0 for _ in dirty[1:])]
        ends = [*(s.base_offset for s in dirty[1:]), end]
        for segment, position, next_start in zip(dirty, positions, ends, strict=True):
            self.check_done()
            if self._map_segment(segment, start, position, next_start, txns, stats):
                return

    def _map_segment(
        self,
        segment: SegmentFile,
        start: int,
        position: int,
        next_start: int,
        txns: CleanedTransactions,
        stats: CleanerStats,
    ) -> bool:
        """Map the keys of ``segment`` at or after ``start``; True if the map filled on the way."""
        for header, batch in self._batches(segment, position):
            stats.map_bytes_read += header.size
            if header.is_control:
                txns.on_marker(header, batch)
                stats.map_records_read += 1
            elif txns.on_batch(header) or (records := records_of(header, batch)) is None:
                stats.map_records_read += header.records_count
            else:
                for record in records:
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and offset >= start:
                        if self.map.full:
                            return True
                        self.map.put(record.key, offset)
                    stats.map_records_read += 1
            if header.last_offset >= start:
                self.map.update_latest_offset(header.last_offset)
        self.map.update_latest_offset(next_start - 1)
        return False

    # -- copying

    def _clean_group(
        self,
        plan: CleaningPlan,
        group: list[SegmentFile],
        txns: CleanedTransactions,
        swap: Swap,
        stats: CleanerStats,
    ) -> None:
        """Copy ``group`` into one ``.cleaned`` segment and swap it in for the group."""
        cleaned = Segment.create(
            plan.directory, group[0].base_offset, plan.index_interval_bytes, suffix=CLEANED_SUFFIX
        )
        txns.cleaned_index = cleaned.txn_index
        try:
            for i, segment in enumerate(group):
                segment_end = group[i + 1].base_offset if i + 1 < len(group) else segment.next_offset
                txns.add_aborted(aborted_between(plan.segments, segment.base_offset, segment_end))
                filter_ = _RecordFilter(
                    self.map, txns, plan.last_records, plan.now_ms, plan.upper_bound, stats
                )
                self._copy(segment, cleaned, filter_.horizon_after(plan.delete_retention_ms), stats)
            cleaned.seal()
            try:  # the cleaned segment keeps the group's modification time, as in Kafka
                last_modified = os.stat(group[-1].path).st_mtime_ns
            except FileNotFoundError:
                raise CleaningAborted(f"{group[-1].path.name} was deleted") from None
            os.utime(cleaned.path, ns=(last_modified, last_modified))
            if not swap(cleaned, group):
                raise CleaningAborted(f"{plan.topic_partition} changed during the cleaning")
        except BaseException:
            cleaned.delete()
            raise

    def _copy(self, source: SegmentFile, dest: Segment, filter_: _RecordFilter, stats: CleanerStats) -> None:
        out = bytearray()
        infos: list[BatchInfo] = []
        for header, batch in self._batches(source, 0):
            stats.bytes_read += header.size
            copied = filter_.copy(header, batch)
            stats.records_read += copied.records_read
            stats.records_written += copied.records_kept
            stats.compressed_batches_kept += copied.compressed_kept
            if not copied.data:
                continue
            out += copied.data
            infos.append((header.last_offset, copied.max_timestamp, len(copied.data)))
            if len(out) >= self.io_buffer_size:
                self._write(dest, out, infos, stats)
        if out:
            self._write(dest, out, infos, stats)

    def _write(self, dest: Segment, out: bytearray, infos: list[BatchInfo], stats: CleanerStats) -> None:
        dest.append(out, infos)
        stats.bytes_written += len(out)
        self.throttle(len(out))
        out.clear()
        infos.clear()


class _RecordFilter:
    """Kafka's cleaner RecordFilter: which batches and records of the segments being copied stay."""

    def __init__(
        self,
        offset_map: OffsetMap,
        txns: CleanedTransactions,
        last_records: Mapping[int, LastRecord],
        now_ms: int,
        upper_bound: int,
        stats: CleanerStats,
    ) -> None:
        self.map = offset_map
        self.txns = txns
        self.last_records = last_records
        self.now_ms = now_ms
        self.new_horizon = now_ms
        self.upper_bound = upper_bound
        self.stats = stats

    def horizon_after(self, delete_retention_ms: int) -> _RecordFilter:
        """Tombstones and markers first met now are kept for ``delete_retention_ms`` (KIP-534)."""
        self.new_horizon = self.now_ms + delete_retention_ms
        return self

    def _last_of_producer(self, header: RecordBatchHeader) -> bool:
        """The batch holding its producer's last sequence (or, after a marker, its latest epoch)."""
        last = self.last_records.get(header.producer_id) if header.producer_id >= 0 else None
        if last is None:
            return False
        if last.last_data_offset is not None:
            return bool(header.last_offset == last.last_data_offset)
        return header.is_control and header.producer_epoch == last.producer_epoch

    def copy(self, header: RecordBatchHeader, batch: memoryview) -> Copied:
        can_discard = self.txns.on_marker(header, batch) if header.is_control else self.txns.on_batch(header)
        horizon = header.delete_horizon_ms
        if header.is_control:
            discard_records = can_discard and horizon is not None and horizon <= self.now_ms
        else:
            discard_records = can_discard
        retain_empty = self._last_of_producer(header) or header.next_offset == self.upper_bound
        if discard_records and not retain_empty:
            return Copied(b"", header.max_timestamp, header.records_count, 0)

        def keep(offset: int, record: Record) -> bool:
            if header.is_control or offset > self.map.latest_offset:
                return True
            if record.key is None:
                self.stats.invalid_records += 1
                return False
            deletes_kept = horizon is None or self.now_ms < horizon
            return offset >= self.map.get(record.key) and (record.value is not None or deletes_kept)

        return copy_batch(
            header,
            batch,
            discard_records=discard_records,
            retain_empty=retain_empty,
            marker_for_empty_txn=can_discard and header.is_control,
            keep=keep,
            new_horizon=self.new_horizon,
        )
