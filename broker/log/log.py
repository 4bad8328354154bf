"""A partition's log: segments of record batches on disk, with Kafka's offsets, epochs and retention.

One writer at a time (appends, truncations, rolls, retention, flushes hold ``_lock``); readers on
other threads take no lock. Appends only add bytes past what readers may see and then publish the
new sizes and log end offset, so a reader never meets half a batch. Changes that remove bytes
(truncation, retention, close) bump ``_changes`` before and after; a read that overlapped one is
thrown away and done again under the lock.

Producer state (``broker.log.producer_manager``) lives beside the batches: a leader's append checks
idempotent producers' sequences and answers a retried batch with its original offsets; snapshots at
each roll and on close, and a replay of the batch headers after the latest one, restore it on open.
It also follows transactions: markers (:meth:`Log.append_marker` on a leader, replicated batches on
a follower) end them, aborts are indexed per segment (``.txnindex``) for read_committed fetches
(:meth:`Log.aborted_transactions`), and open ones bound :meth:`Log.last_stable_offset`.

The log cleaner (``broker.log.compaction``) reads a :meth:`Log.cleaning_view` and swaps cleaned
segments in with :meth:`Log.replace_segments`, a change that removes bytes like the others.
"""

from __future__ import annotations

import logging
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from typing import Any

from broker.checkpoint import fsync_directory
from broker.log.cleaning_view import CleaningView, LastRecord
from broker.log.config import LogConfig
from broker.log.epoch_cache import CHECKPOINT_FILE, LeaderEpochCache
from broker.log.outcomes import AppendInfo, InvalidRecord, LogClosed, OffsetOutOfRange, UnexpectedAppendOffset
from broker.log.producer_manager import ProducerStateManager
from broker.log.producer_state import ProducerStateEntry
from broker.log.recovery import load_segments, report
from broker.log.retention import expired_count
from broker.log.segment import MAX_RELATIVE_OFFSET, BatchInfo, Segment, wall_clock_ms
from broker.log.swap import begin_swap, finish_swap
from broker.log.transactions import TxnMarker
from broker.log.txn_index import collect_aborted
from broker.log.validation import Batches, checked_batches, leader_batches
from protocol.control_records import control_batch
from protocol.record_batch import parse_header, restamp_in_place

__all__ = ["Log"]

log = logging.getLogger("broker.log")


class Log:
    """Open with :meth:`open`; see the module docstring for the threading rules."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[Segment],
        epochs: LeaderEpochCache,
        log_start_offset: int,
        recovery_point: int,
    ) -> None:
        self.directory = directory
        self.topic_partition = directory.name
        self.config = config
        self._segments = tuple(segments)
        self._epochs = epochs
        self._log_start_offset = log_start_offset
        self._log_end_offset = segments[-1].next_offset
        self._recovery_point = recovery_point
        self._lock = threading.Lock()
        self._changes = 0
        self._truncations = 0
        self._closed = False
        self._producers = ProducerStateManager(directory, self.topic_partition)

    # -- opening

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        emit: Callable[..., Any] | None = None,
    ) -> Log:
        """Open (creating the directory if needed) and recover the log, see ``broker.log.recovery``."""
        directory.mkdir(parents=True, exist_ok=True)
        epochs = LeaderEpochCache(directory / CHECKPOINT_FILE)
        loaded = load_segments(directory, config.index_interval_bytes, recovery_point, epochs)
        segments = loaded.segments
        if not segments:
            segments = [Segment.create(directory, log_start_offset or 0, config.index_interval_bytes)]
            fsync_directory(directory)
        log_end = segments[-1].next_offset
        start = max(log_start_offset if log_start_offset is not None else 0, segments[0].base_offset)
        if log_end < start:
            log.warning(
                "%s: log end offset %d is below the log start offset %d: starting empty at %d",
                directory.name, log_end, start, start,
            )  # fmt: skip
            for segment in segments:
                segment.delete()
            segments = [Segment.create(directory, start, config.index_interval_bytes)]
            fsync_directory(directory)
            epochs.clear()
            log_end = start
        epochs.truncate_from_end(log_end)
        epochs.truncate_from_start(start)
        if not epochs.trusted:
            epochs.save()
        opened = cls(directory, config, segments, epochs, start, min(recovery_point, log_end))
        opened._producers.load(
            opened._segments,
            start,
            log_end,
            config.producer_id_expiration_ms,
            clean=recovery_point >= log_end and loaded.truncation is None,
        )
        report(loaded, opened.topic_partition, log_end, emit)
        return opened

    # -- state

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is fsynced; a restart checks only from the segment holding it."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def _require_open(self) -> None:
        if self._closed:
            raise LogClosed(f"log {self.topic_partition} is closed")

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Around a change that removes bytes: lock-free readers that overlap it read again."""
        self._changes += 1
        try:
            yield
        finally:
            self._changes += 1

    # -- appending

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Validate every batch, give them the next offsets and ``leader_epoch``, append them all or none.

        CorruptRecordBatch (InvalidRecord included) or RecordTooLarge, and nothing appended, if any
        batch is bad; InvalidProducerEpoch or OutOfOrderSequence if an idempotent producer's batch
        breaks its epoch or sequence, InvalidTxnState for a plain batch inside its open transaction. A
        retry of a batch still remembered appends nothing and answers with the stored batch
        (``AppendInfo.duplicate``). ``last_offset_delta`` stays as the producer set it. The
        ``coordinator``'s own batches have only their producer epoch checked (Kafka's COORDINATOR
        origin).
        """
        view, batches = leader_batches(records, self.config.max_batch_bytes)
        data = bytearray(view)
        with self._lock:
            self._require_open()
            first = self._log_end_offset
            bases = list(accumulate((h.last_offset_delta + 1 for h, _, _ in batches[:-1]), initial=first))
            headers = (h for h, _, _ in batches)
            check = self._producers.table.check_leader_append(
                zip(headers, bases, strict=True), coordinator=coordinator
            )
            if check.duplicate is not None:
                return AppendInfo.of_duplicate(check.duplicate)
            infos: list[BatchInfo] = []
            for (header, position, size), base in zip(batches, bases, strict=True):
                restamp_in_place(data, position, base, leader_epoch)
                infos.append((base + header.last_offset_delta, header.max_timestamp, size))
            self._epochs.assign(leader_epoch, first)
            info = self._append(data, infos, batches, first, now_ms)
            self._producers.table.apply(check.updates)
            return info

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches as the leader stamped them; they must start at the log end and go forward."""
        view, batches = checked_batches(records)
        with self._lock:
            self._require_open()
            expected = self._log_end_offset
            if not batches:
                return AppendInfo(expected, expected - 1, -1, -1, 0, 0, 0)
            if batches[0][0].base_offset != expected:
                raise UnexpectedAppendOffset(expected, batches[0][0].base_offset)
            infos: list[BatchInfo] = []
            for header, position, size in batches:
                if header.base_offset < expected:
                    raise InvalidRecord(f"batch at byte {position}: offset {header.base_offset} goes back")
                infos.append((header.last_offset, header.max_timestamp, size))
                expected = header.next_offset
            for header, _, _ in batches:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
            info = self._append(view, infos, batches, batches[0][0].base_offset, None)
            active = self._segments[-1]
            for header, position, size in batches:
                self._producers.replicated(header, view[position : position + size], active)
            return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Append, as leader, the marker that commits or aborts ``producer_id``'s transaction (for the
        transaction coordinator's WriteTxnMarkers); an abort is indexed. InvalidProducerEpoch for an
        older producer epoch, TransactionCoordinatorFenced for an older coordinator epoch, and nothing
        appended; a marker for no open transaction is appended and ends nothing."""
        now = wall_clock_ms() if now_ms is None else now_ms
        data = bytearray(control_batch(producer_id, producer_epoch, coordinator_epoch, commit, now))
        header = parse_header(data)  # its offset and leader epoch are stamped under the lock
        marker = TxnMarker(commit, coordinator_epoch)
        with self._lock:
            self._require_open()
            offset = self._log_end_offset
            entry, txn = self._producers.table.check_marker(
                producer_id, producer_epoch, marker, offset, header.max_timestamp
            )
            restamp_in_place(data, 0, offset, leader_epoch)
            self._epochs.assign(leader_epoch, offset)
            info = self._append(
                data, [(offset, header.max_timestamp, len(data))], [(header, 0, len(data))], offset, now
            )
            self._producers.table.apply({producer_id: entry})
            self._producers.complete(txn, self._segments[-1])
            return info

    def _append(
        self,
        data: bytearray | memoryview,
        infos: list[BatchInfo],
        batches: Batches,
        first_offset: int,
        now: int | None,
    ) -> AppendInfo:
        max_timestamp, offset_of_max = -1, -1
        for last_offset, timestamp, _ in infos:
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last_offset
        last_offset = infos[-1][0]
        active = self._segments[-1]
        now = wall_clock_ms() if now is None else now
        if self._should_roll(active, len(data), max_timestamp, last_offset, now):
            active = self._roll()
        active.append(data, infos)
        self._log_end_offset = last_offset + 1
        return AppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max,
            len(batches),
            sum(header.records_count for header, _, _ in batches),
            len(data),
        )

    def _should_roll(
        self, active: Segment, size: int, max_timestamp: int, last_offset: int, now: int
    ) -> bool:
        """Kafka's rule: full, too old (by the first batch's timestamp, else creation), or offsets that
        no longer fit the index's int32 relative offsets. An empty segment never rolls."""
        if active.size == 0:
            return False
        if active.size + size > self.config.segment_bytes:
            return True
        if last_offset - active.base_offset > MAX_RELATIVE_OFFSET:
            return True
        rolling = active.rolling_timestamp()
        waited = max_timestamp - rolling if rolling >= 0 else now - active.created_ms
        return waited > self.config.segment_ms

    def _roll(self) -> Segment:
        """A new active segment at the log end; the old one is sealed and fsynced, so the recovery
        point moves to the new base (Kafka flushes it in the background; here the append waits).
        The producer state at the new base is snapshotted."""
        old = self._segments[-1]
        new = Segment.create(self.directory, self._log_end_offset, self.config.index_interval_bytes)
        fsync_directory(self.directory)
        old.seal()
        self._segments = (*self._segments, new)
        self._recovery_point = max(self._recovery_point, new.base_offset)
        self._producers.snapshot(new.base_offset, self._log_start_offset)
        return new

    # -- reading

    def read(
        self, start_offset: int, max_bytes: int, *, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> bytes:
        """Whole batches from the one holding ``start_offset``, ending at or before ``upper_bound`` (the
        high watermark for consumers; the log end if None), at most ``max_bytes`` unless the first
        batch alone is larger and ``min_one_batch`` (KIP-74). Like Kafka, one read stays in one segment.

        OffsetOutOfRange outside [log_start_offset, log_end_offset]; empty at the end.
        """
        changes = self._changes
        if not changes & 1:
            try:
                data = self._read(start_offset, max_bytes, upper_bound, min_one_batch)
            except Exception:
                if self._changes == changes:
                    raise
            else:
                if self._changes == changes:
                    return data
        with self._lock:
            return self._read(start_offset, max_bytes, upper_bound, min_one_batch)

    def _read(self, start_offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool) -> bytes:
        self._require_open()
        log_end = self._log_end_offset  # before the segments: they hold at least this much
        segments = self._segments
        log_start = self._log_start_offset
        if not log_start <= start_offset <= log_end:
            raise OffsetOutOfRange(start_offset, log_start, log_end)
        upper = log_end if upper_bound is None else min(upper_bound, log_end)
        if start_offset >= upper:
            return b""
        i = max(bisect_right(segments, start_offset, key=lambda s: s.base_offset) - 1, 0)
        for segment in segments[i:]:
            data = segment.read(start_offset, max_bytes, upper, min_one_batch)
            if data is not None:
                return data
        return b""

    def last_stable_offset(self, high_watermark: int) -> int:
        """How far read_committed consumers may read: ``high_watermark``, or before it the first offset
        of a transaction still open or whose marker the high watermark has not passed (Kafka's rule,
        never below the log start), forgetting ended ones it passed, under the writer's lock; a log
        without transactions skips it: callers hold the partition's lock, as such appends do."""
        if not self._producers.table.transactions:
            return high_watermark
        with self._lock:
            first = self._producers.table.transactions.first_unstable_offset(high_watermark)
            log_start = self._log_start_offset
        return high_watermark if first is None else min(max(first, log_start), high_watermark)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark moved (a follower's): ended transactions whose markers it
        passed stop holding the last stable offset back (Kafka's onHighWatermarkUpdated)."""
        self.last_stable_offset(high_watermark)

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction overlapping [``start_offset``,
        ``upper_bound``), for a read_committed fetch: Kafka's search of the aborted indexes from the
        segment holding ``start_offset`` on, until an entry's last stable offset reaches the bound.
        Lock-free: indexes are replaced whole, and a segment deleted meanwhile still answers."""
        segments = self._segments
        i = max(bisect_right(segments, start_offset, key=lambda s: s.base_offset) - 1, 0)
        found = collect_aborted((s.txn_index for s in segments[i:]), start_offset, upper_bound)
        return [(txn.producer_id, txn.first_offset) for txn in found]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped >= ``timestamp`` (ListOffsets), or None.

        Compressed batches are not decoded: the answer is then the batch's first offset and its
        largest timestamp.
        """
        with self._lock:
            self._require_open()
            for segment in self._segments:
                if segment.max_timestamp >= timestamp:
                    found = segment.find_timestamp(timestamp, self._log_start_offset)
                    if found is not None:
                        return found
            return None

    # -- truncating

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a follower diverged from its leader)
        and return the new log end offset; nothing happens if ``offset`` is at or past the end."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic_partition} to negative offset {offset}")
        with self._lock:
            self._require_open()
            if offset >= self._log_end_offset:
                return self._log_end_offset
            segments = self._segments
            if segments[0].base_offset > offset:
                self._start_at(offset)
                return offset
            keep = bisect_right(segments, offset, key=lambda s: s.base_offset)
            self._truncations += 1
            with self._changing():
                self._segments = segments[:keep]
                for segment in segments[keep:]:
                    segment.delete()
                self._segments[-1].truncate_to(offset)
                self._segments[-1].flush()  # the diverged batches must not come back after a crash
                self._log_end_offset = self._segments[-1].next_offset
                self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
                self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._epochs.truncate_from_end(self._log_end_offset)
            self._producers.truncated(
                self._segments,
                self._log_start_offset,
                self._log_end_offset,
                self.config.producer_id_expiration_ms,
            )
            return self._log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (a follower far behind its leader's start)."""
        with self._lock:
            self._require_open()
            self._start_at(offset)

    def _start_at(self, offset: int) -> None:
        self._truncations += 1
        with self._changing():
            for segment in self._segments:
                segment.delete()
            self._segments = (Segment.create(self.directory, offset, self.config.index_interval_bytes),)
            fsync_directory(self.directory)
            self._log_start_offset = self._log_end_offset = self._recovery_point = offset
        self._epochs.clear()
        self._producers.reset()

    # -- retention

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Delete the oldest segments past ``retention.ms`` or beyond ``retention.bytes`` (see
        ``broker.log.retention``). Returns how many went."""
        with self._lock:
            self._require_open()
            segments = self._segments
            count = expired_count(segments, self.config, now_ms, high_watermark)
            if count == 0:
                return 0
            with self._changing():
                self._segments = segments[count:]
                self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
                self._recovery_point = max(self._recovery_point, self._log_start_offset)
                for segment in segments[:count]:
                    segment.delete()
            self._epochs.truncate_from_start(self._log_start_offset)
            self._producers.delete_snapshots_outside(self._log_start_offset, self._log_end_offset)
            log.info(
                "%s: retention deleted %d segment(s); log start offset now %d",
                self.topic_partition, count, self._log_start_offset,
            )  # fmt: skip
            return count

    # -- compaction (broker.log.compaction)

    def cleaning_view(self) -> CleaningView:
        """The segments, offsets and producers' last batches a cleaning plans from, at one instant."""
        with self._lock:
            self._require_open()
            last = {
                e.producer_id: LastRecord(e.batches[-1].last_offset if e.batches else None, e.epoch)
                for e in self._producers.table.entries()
            }
            return CleaningView(
                self._segments, self._log_start_offset, self._log_end_offset, self._truncations, last
            )

    def replace_segments(self, cleaned: Segment, replaced: Sequence[Segment], truncations: int) -> bool:
        """Swap ``cleaned`` (sealed, its files named ``.cleaned``) in for the run of segments
        ``replaced``, crash-safely (``broker.log.swap``); readers that overlap read again. False, and
        nothing swapped, if the log is closed, was truncated since its view said ``truncations``, or
        no longer holds ``replaced`` before its active segment (retention took one)."""
        with self._lock:
            segments = self._segments
            first = next((i for i, s in enumerate(segments) if s is replaced[0]), len(segments))
            end = first + len(replaced)
            if self._closed or self._truncations != truncations or end >= len(segments):
                return False
            if any(a is not b for a, b in zip(segments[first:end], replaced, strict=True)):
                return False
            begin_swap(cleaned)
            with self._changing():
                finish_swap(cleaned, replaced)
                self._segments = (*segments[:first], cleaned, *segments[end:])
            return True

    # -- producer state

    @property
    def producer_count(self) -> int:
        """Idempotent and transactional producers with state in this partition."""
        return len(self._producers.table)

    def producer_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """A producer's state here (an immutable entry), None if it has none."""
        return self._producers.table.get(producer_id)

    def reconfigure(self, config: LogConfig) -> None:
        """New settings (a topic-level override changed); the segments on disk stay as they are."""
        with self._lock:
            self.config = config

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer_id_expiration_ms``; returns how many. The broker calls
        it periodically (Kafka: every producer.id.expiration.check.interval.ms, 10 minutes)."""
        with self._lock:
            self._require_open()
            now = wall_clock_ms() if now_ms is None else now_ms
            gone = self._producers.table.remove_expired(now, self.config.producer_id_expiration_ms)
        if gone:
            log.info("%s: expired producer ids %s", self.topic_partition, gone)
        return len(gone)

    # -- durability and lifetime

    def flush(self) -> None:
        """fsync everything not yet flushed; the recovery point becomes the log end offset."""
        with self._lock:
            self._require_open()
            log_end = self._log_end_offset
            if self._recovery_point >= log_end:
                return
            segments = self._segments
            first = max(bisect_right(segments, self._recovery_point, key=lambda s: s.base_offset) - 1, 0)
            for segment in segments[first:]:
                segment.flush()
            self._recovery_point = log_end

    def close(self) -> None:
        """Snapshot the producer state and close every file (without a flush of the segments: call
        :meth:`flush` first for a clean shutdown)."""
        self._close(snapshot=True)

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self._close(snapshot=False)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _close(self, *, snapshot: bool) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                if snapshot:
                    self._producers.snapshot(self._log_end_offset, self._log_start_offset, sync=True)
            except OSError as exc:
                log.warning("%s: no producer snapshot written on close: %s", self.topic_partition, exc)
            with self._changing():
                self._closed = True
                for segment in self._segments:
                    segment.close()

    # -- leader epochs

    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that leader ``epoch`` starts at ``start_offset`` (a new leader, at its log end)."""
        with self._lock:
            self._require_open()
            self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, where the next epoch starts): OffsetForLeaderEpoch's answer."""
        return self._epochs.end_offset_for(epoch, self._log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the leader that wrote ``offset`` (-1 if unknown)."""
        return self._epochs.epoch_for_offset(offset)

    def epoch_entries(self) -> tuple[tuple[int, int], ...]:
        """The leader epoch cache: (epoch, start offset) pairs, both increasing."""
        return self._epochs.entries
