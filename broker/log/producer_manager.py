"""A log's producer state kept in step with its segments: loaded at open, snapshotted, rebuilt after cuts.

The snapshot at offset N holds the state of the log before N. Every roll and close writes one, and
only a roll or a clean shutdown flushes; so a cleanly closed log without one was written before
producer state existed (or holds nothing) and is not read at all, as in Kafka. Otherwise the state is
the latest readable snapshot's, brought to the log end by replaying the batch headers after it.

Transactions ended by an ABORT marker go to the aborted index of the segment holding the marker, as
the marker is appended or replayed: a replay first drops the entries it is about to write again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from broker.log.producer_snapshots import ProducerSnapshots
from broker.log.producer_state import ProducerStateTable
from broker.log.segment import InvalidBytes, Segment, wall_clock_ms
from broker.log.transactions import CompletedTxn, marker_of
from broker.log.txn_index import AbortedTxn
from protocol.record_batch import RecordBatchHeader

__all__ = ["ProducerStateManager"]

log = logging.getLogger("broker.log")


class ProducerStateManager:
    """The producer state table of one log and its snapshot files; called by the log's one writer.

    The log passes its segments and offsets as they are at each call: ``log_start`` and ``log_end``
    are its log start and log end offsets.
    """

    def __init__(self, directory: Path, topic_partition: str) -> None:
        self.topic_partition = topic_partition
        self.table = ProducerStateTable()
        """Idempotent producers' state; replaced whole when rebuilt."""
        self._snapshots = ProducerSnapshots(directory)

    def load(
        self, segments: Sequence[Segment], log_start: int, log_end: int, expiration_ms: int, *, clean: bool
    ) -> None:
        """At open: the latest good snapshot inside the log, then the batches after it; nothing is read
        for a log closed ``clean`` without a snapshot (see the module docstring)."""
        self._snapshots.delete_outside(log_start, log_end)
        if clean and self._snapshots.latest() is None:
            self.snapshot(log_end, log_start)
        else:
            self._reload(segments, log_start, log_end, expiration_ms)

    def truncated(
        self, segments: Sequence[Segment], log_start: int, log_end: int, expiration_ms: int
    ) -> None:
        """After a truncation: snapshots past the new end go and the state is rebuilt from those left.
        A state that was empty stays empty, and nothing is read (logs without idempotent producers)."""
        self._snapshots.delete_outside(log_start, log_end)
        if len(self.table):
            self._reload(segments, log_start, log_end, expiration_ms)

    def reset(self) -> None:
        """The log starts over empty: no producers, no snapshots."""
        self.table = ProducerStateTable()
        self._snapshots.delete_all()

    def delete_snapshots_outside(self, log_start: int, log_end: int) -> None:
        """Drop the snapshots no longer inside the log (retention moved its start)."""
        self._snapshots.delete_outside(log_start, log_end)

    def replicated(
        self, header: RecordBatchHeader, batch: bytes | bytearray | memoryview | None, segment: Segment
    ) -> None:
        """A batch the log holds in ``segment`` at its own offsets (a follower's append, or a replay):
        applied unchecked. ``batch`` (the whole batch) is needed only for a producer's control batch."""
        marker = None
        if batch is not None and header.is_control and header.producer_id >= 0:
            marker = marker_of(header, batch)
        self.complete(self.table.apply_replicated(header, marker), segment)

    def complete(self, txn: CompletedTxn | None, segment: Segment) -> None:
        """A marker in ``segment`` ended ``txn`` (if any): an abort is indexed with the last stable
        offset it leaves (Kafka's), then the transaction stops counting as open."""
        if txn is None:
            return
        tracker = self.table.transactions
        if txn.aborted:
            stable = tracker.last_stable_offset_after(txn)
            segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable))
        tracker.complete(txn)

    def snapshot(self, offset: int, log_start: int, *, sync: bool = False) -> None:
        """Snapshot the state, which must be that of the log before ``offset``, unless it has not
        advanced: a snapshot at or after ``offset`` exists, or ``offset`` is the log start. Only the
        one written on close is fsynced (as in Kafka): a clean start may rely on it."""
        latest = self._snapshots.latest()
        if offset > (latest if latest is not None else log_start):
            self._snapshots.write(offset, self.table.entries(), sync=sync)

    def _reload(self, segments: Sequence[Segment], log_start: int, log_end: int, expiration_ms: int) -> None:
        """The state of the latest readable snapshot (expired producers left out), or an empty one at
        the log start, brought to the log end by replaying the batches after it; snapshotted there."""
        loaded = self._snapshots.load_latest(wall_clock_ms(), expiration_ms)
        start, entries = loaded if loaded is not None else (log_start, [])
        self.table = ProducerStateTable(entries)
        self._replay(segments, start, log_start)
        self.snapshot(log_end, log_start)

    def _replay(self, segments: Sequence[Segment], start: int, log_start: int) -> None:
        """Apply every batch from ``start`` to the log end, unchecked, reading headers (and markers)
        only, and index the aborts met again (synced at once: a sealed segment is not flushed again).
        On the way, snapshot at the bases of the last two segments, so a later truncation replays
        little (Kafka)."""
        snapshot_bases = {segment.base_offset for segment in segments[-2:]}
        for segment in segments:
            if segment.next_offset <= start:
                continue
            if segment.base_offset in snapshot_bases:
                self.snapshot(segment.base_offset, log_start)
            segment.txn_index.truncate_to(start)
            try:
                for header, batch in segment.producer_batches(max(start, segment.base_offset)):
                    self.replicated(header, batch, segment)
            except InvalidBytes as exc:  # a segment trusted at open is not checked: fetches fail there too
                log.warning(
                    "%s: producer state skips the rest of %s: %s",
                    self.topic_partition,
                    segment.path.name,
                    exc,
                )
            segment.txn_index.flush()
