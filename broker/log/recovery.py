"""Opening a partition's segments after a clean stop or a crash: trust what was flushed, check the rest.

A swap of cleaned segments that a crash interrupted is finished or undone first (``broker.log.swap``).
Segments below the recovery point (fsynced before) are trusted when their indexes are sane; from the
segment holding the recovery point on, every batch is checked, as Kafka's log loader does. A segment
that ends at or before the recovery point (a clean shutdown flushes to the end) needs no check. The
first invalid byte ends the log: that segment is cut there and every later one deleted, so nothing
beyond the last valid batch is ever served.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from broker.log.epoch_cache import LeaderEpochCache
from broker.log.index import CorruptIndex
from broker.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    InvalidBytes,
    Segment,
    offset_from_file_name,
)
from broker.log.swap import complete_swaps
from broker.log.txn_index import TXN_INDEX_SUFFIX
from protocol.record_batch import RecordBatchHeader

log = logging.getLogger("broker.log")


@dataclass(frozen=True)
class Truncation:
    """Where recovery found the first invalid byte, and why."""

    path: Path
    position: int
    reason: str


@dataclass
class Loaded:
    segments: list[Segment]
    truncation: Truncation | None = None
    rebuilt_indexes: list[tuple[Path, str]] = field(default_factory=list)
    """(segment file, why) for each segment whose indexes were rebuilt without losing data."""


def load_segments(
    directory: Path, index_interval_bytes: int, recovery_point: int, epochs: LeaderEpochCache
) -> Loaded:
    """Every segment in ``directory``, checked or trusted as the recovery point allows.

    Epochs met while checking batches are given to ``epochs`` when above its latest (Kafka's rule:
    a scan never rewinds the cache). A missing or corrupt cache makes every segment checked, so the
    epochs are rebuilt from the first batch on.
    """
    for line in complete_swaps(directory):
        log.warning("%s: %s", directory.name, line)
    bases = sorted(
        {b for p in directory.glob(f"*{LOG_SUFFIX}") if (b := offset_from_file_name(p)) is not None}
    )
    _delete_orphan_indexes(directory, bases)
    segments = [Segment.open(directory, base, index_interval_bytes) for base in bases]
    rebuild_epochs = not epochs.trusted and any(s.size for s in segments)
    check_from = 0 if rebuild_epochs else max(bisect_right(bases, recovery_point) - 1, 0)
    on_batch = partial(_record_epoch, epochs)
    loaded = Loaded([])
    previous_end = 0
    for i, segment in enumerate(segments):
        if loaded.segments and segment.base_offset < previous_end:
            loaded.truncation = Truncation(
                segment.path, 0, f"base offset {segment.base_offset} is below the previous segment's end"
            )
            _delete(segments[i:])
            break
        index_problem: Exception | None = None
        try:
            segment.load()
            check = i >= check_from and (rebuild_epochs or segment.next_offset > recovery_point)
        except (CorruptIndex, InvalidBytes) as exc:
            check, index_problem = True, exc
        invalid = segment.recover(previous_end, on_batch) if check else None
        loaded.segments.append(segment)
        if invalid is not None:
            loaded.truncation = Truncation(segment.path, invalid.position, invalid.reason)
            _delete(segments[i + 1 :])
            break
        if index_problem is not None:
            loaded.rebuilt_indexes.append((segment.path, str(index_problem)))
        previous_end = segment.next_offset
    for segment in loaded.segments[:-1]:
        segment.close_index_files()
    return loaded


def report(loaded: Loaded, topic_partition: str, log_end: int, emit: Callable[..., Any] | None) -> None:
    """Log (and ``emit`` as events) what opening a log repaired: rebuilt indexes, a truncation."""
    for path, reason in loaded.rebuilt_indexes:
        log.warning("%s: rebuilt the indexes of %s: %s", topic_partition, path.name, reason)
        if emit is not None:
            emit("log_index_rebuilt", topic_partition=topic_partition, path=str(path), reason=reason)
    if loaded.truncation is not None:
        cut = loaded.truncation
        log.warning(
            "%s: recovery truncated %s at byte %d (%s); later segments deleted; log end offset now %d",
            topic_partition, cut.path.name, cut.position, cut.reason, log_end,
        )  # fmt: skip
        if emit is not None:
            emit(
                "log_recovery_truncated",
                topic_partition=topic_partition,
                path=str(cut.path),
                position=cut.position,
                reason=cut.reason,
                log_end_offset=log_end,
            )


def _delete_orphan_indexes(directory: Path, bases: list[int]) -> None:
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        for path in directory.glob(f"*{suffix}"):
            if offset_from_file_name(path) not in bases:
                log.info("%s: deleting %s, whose segment is gone", directory.name, path.name)
                path.unlink()


def _record_epoch(epochs: LeaderEpochCache, header: RecordBatchHeader) -> None:
    """A checked batch's epoch joins the cache when it is above its latest: a scan never rewinds it."""
    latest = epochs.latest_epoch
    if header.partition_leader_epoch >= 0 and (latest is None or header.partition_leader_epoch > latest):
        epochs.assign(header.partition_leader_epoch, header.base_offset)


def _delete(segments: list[Segment]) -> None:
    for segment in segments:
        segment.delete()
