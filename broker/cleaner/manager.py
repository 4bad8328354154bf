"""Which compacted log to clean next, and the state of each cleaning (Kafka's LogCleanerManager).

Per log: the cleaner checkpoint (``cleaner-offset-checkpoint`` in the log dir, Kafka's checkpoint
format) gives the first dirty offset; everything before it was cleaned once. The cleanable range ends
at the first uncleanable offset: the active segment's base, the last stable offset (open
transactions and the high watermark), and the first segment whose newest record is younger than
min.compaction.lag.ms, whichever comes first. Cleaning picks the log with the highest dirty ratio
(cleanable bytes over clean plus cleanable bytes) above its min.cleanable.dirty.ratio, or any whose
dirty records waited longer than max.compaction.lag.ms.

A log being cleaned is "in progress"; deleting it aborts the cleaning and waits for the thread to
notice (:meth:`CleanerManager.abort`). A log whose cleaning failed is uncleanable until it is deleted
(Kafka's rule), counted by the metrics. The manager's lock is never held while a log's is wanted
by anyone who then wants the manager's: logs never call in here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from broker.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from broker.log import Log, LogClosed
from broker.log.cleaning_view import CleaningView
from broker.log.compaction import CleaningAborted, segments_between
from broker.log.segment import wall_clock_ms
from zkstore.znodes import TopicPartition

__all__ = ["CHECKPOINT_FILE", "CleanerManager", "LogToClean"]

log = logging.getLogger("broker.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log as the cleaner weighs it (Kafka's LogToClean)."""

    tp: TopicPartition
    log: Log
    first_dirty: int
    first_uncleanable: int
    """The base of the segment holding the first uncleanable offset: the cleaning's upper bound."""
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int
    """How long past max.compaction.lag.ms its oldest dirty record waited (0: not late)."""
    truncations: int
    """The log's truncation count when weighed: the checkpoint written after is valid for it."""

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def first_uncleanable(view: CleaningView, log: Log, first_dirty: int, stable: int, now_ms: int) -> int:
    """Kafka's firstUncleanableDirtyOffset: the last stable offset, the active segment, or the first
    dirty segment too young for min.compaction.lag.ms, never below ``first_dirty``."""
    bounds = [stable, view.active_base]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in segments_between(view.segments[:-1], first_dirty, view.active_base):
            if segment.largest_timestamp() > now_ms - lag:
                bounds.append(segment.base_offset)
                break
    return max(first_dirty, min(bounds))


def compaction_delay(view: CleaningView, log: Log, first_dirty: int, now_ms: int) -> int:
    """Kafka's maxCompactionDelay: how long past max.compaction.lag.ms the oldest dirty segment's first
    batch is (0 if it is not)."""
    stamps = [
        s.rolling_timestamp() for s in segments_between(view.segments[:-1], first_dirty, view.active_base)
    ]
    earliest = min((t for t in stamps if t > 0), default=None)
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


class CleanerManager:
    """The checkpoints, the cleanings in progress and the uncleanable logs of one log directory."""

    def __init__(
        self,
        log_dir: Path,
        logs: Callable[[], Mapping[TopicPartition, Log]],
        high_watermark: Callable[[TopicPartition], int | None],
    ) -> None:
        self.log_dir = log_dir
        self.checkpoint_path = log_dir / CHECKPOINT_FILE
        self.logs = logs
        self.high_watermark = high_watermark
        self._lock = threading.Condition()
        self._in_progress: dict[TopicPartition, bool] = {}
        """Logs being cleaned -> whether their cleaning was asked to abort."""
        self._uncleanable: set[TopicPartition] = set()
        self._truncations: dict[TopicPartition, int] = {}
        """The truncation count of each log when its checkpoint was last written."""
        self.dirtiest_ratio = 0.0
        self.last_run_ms = wall_clock_ms()

    # -- checkpoints

    def checkpoints(self) -> dict[TopicPartition, int]:
        try:
            return read_offsets(self.checkpoint_path)
        except CorruptCheckpoint as exc:
            log.error("ignoring a corrupt cleaner checkpoint (every log counts as dirty): %s", exc)
            return {}

    def _update_checkpoint(self, tp: TopicPartition, offset: int | None) -> None:
        """Set (or, for None, remove) one log's entry; entries of logs no longer here go too."""
        offsets = self.checkpoints()
        present = self.logs()
        offsets = {t: o for t, o in offsets.items() if t in present and t != tp}
        if offset is not None:
            offsets[tp] = offset
        write_offsets(self.checkpoint_path, offsets)

    # -- choosing

    def _weigh(
        self, tp: TopicPartition, partition_log: Log, checkpoint: int | None, now_ms: int
    ) -> tuple[LogToClean | None, bool]:
        """The log as the cleaner sees it now (None without a high watermark), and whether its
        checkpoint must go back to the log start: outside the log, or the log was truncated since."""
        high_watermark = self.high_watermark(tp)
        if high_watermark is None:
            return None, False
        view = partition_log.cleaning_view()
        stable = partition_log.last_stable_offset(high_watermark)
        first_dirty = view.log_start_offset if checkpoint is None else checkpoint
        truncated = self._truncations.get(tp, view.truncations) != view.truncations
        reset = first_dirty < view.log_start_offset or first_dirty > view.log_end_offset or truncated
        if reset:
            first_dirty = view.log_start_offset
        uncleanable = first_uncleanable(view, partition_log, first_dirty, stable, now_ms)
        holding = segments_between(view.segments[:-1], uncleanable, view.active_base)
        upper = holding[0].base_offset if holding else view.active_base
        found = LogToClean(
            tp,
            partition_log,
            first_dirty,
            upper,
            sum(s.size for s in segments_between(view.segments, view.log_start_offset, first_dirty)),
            sum(s.size for s in segments_between(view.segments, min(first_dirty, upper), upper)),
            compaction_delay(view, partition_log, first_dirty, now_ms),
            view.truncations,
        )
        return found, reset

    def _reset(self, found: LogToClean, checkpoint: int | None) -> None:
        if checkpoint is not None and found.log.config.delete is False:
            log.warning(
                "%s: the cleaner checkpoint %d is outside the log or the log was truncated: "
                "cleaning again from the log start offset %d",
                found.log.topic_partition, checkpoint, found.first_dirty,
            )  # fmt: skip
        self._truncations[found.tp] = found.truncations
        self._update_checkpoint(found.tp, found.first_dirty)

    def grab_filthiest(self, now_ms: int) -> tuple[LogToClean | None, int]:
        """The log to clean next, marked in progress (None if none is due), and the largest
        compaction delay seen (Kafka's PreCleanStats)."""
        with self._lock:
            self.last_run_ms = now_ms
            checkpoints = self.checkpoints()
            weighed = []
            for tp, partition_log in self.logs().items():
                if not partition_log.config.compact or tp in self._in_progress or tp in self._uncleanable:
                    continue
                try:
                    found, reset = self._weigh(tp, partition_log, checkpoints.get(tp), now_ms)
                    if found is not None and reset:
                        self._reset(found, checkpoints.get(tp))
                    elif found is not None:
                        self._truncations.setdefault(tp, found.truncations)
                except LogClosed:
                    continue  # deleted meanwhile
                except Exception:
                    log.exception("%s: cannot weigh the log for cleaning: marked uncleanable", tp)
                    self._uncleanable.add(tp)
                    continue
                if found is not None and found.total_bytes > 0:
                    weighed.append(found)
            self.dirtiest_ratio = max((w.cleanable_ratio for w in weighed), default=0.0)
            delay = max((w.compaction_delay_ms for w in weighed), default=0)
            due = [
                w
                for w in weighed
                if (w.compaction_delay_ms > 0 and w.cleanable_bytes > 0)
                or w.cleanable_ratio > w.log.config.min_cleanable_ratio
            ]
            if not due:
                return None, delay
            chosen = max(due, key=lambda w: w.cleanable_ratio)
            self._in_progress[chosen.tp] = False
            return chosen, delay

    # -- the cleaning's lifetime

    def check_aborted(self, tp: TopicPartition) -> None:
        """CleaningAborted if the cleaning of ``tp`` was asked to stop."""
        with self._lock:
            if self._in_progress.get(tp):
                raise CleaningAborted(f"the cleaning of {tp.topic}-{tp.partition} was aborted")

    def done(self, cleaned: LogToClean, end_offset: int | None) -> None:
        """The cleaning ended; ``end_offset`` (None: it did not finish) is the log's new checkpoint."""
        with self._lock:
            aborted = self._in_progress.pop(cleaned.tp, False)
            if end_offset is not None and not aborted and cleaned.tp in self.logs():
                self._update_checkpoint(cleaned.tp, end_offset)
                self._truncations[cleaned.tp] = cleaned.truncations
            self._lock.notify_all()

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.add(tp)

    def abort(self, tp: TopicPartition, *, forget: bool = False) -> None:
        """Stop any cleaning of ``tp`` and wait until its thread noticed; ``forget`` (the log is
        deleted) also drops its checkpoint entry and its uncleanable mark."""
        with self._lock:
            if tp in self._in_progress:
                self._in_progress[tp] = True
                self._lock.wait_for(lambda: tp not in self._in_progress)
            if forget:
                self._uncleanable.discard(tp)
                self._truncations.pop(tp, None)
                if tp in self.checkpoints():
                    self._update_checkpoint(tp, None)

    # -- for the metrics

    @property
    def uncleanable_count(self) -> int:
        with self._lock:
            present = self.logs()
            return sum(1 for tp in self._uncleanable if tp in present)

    def uncleanable_bytes(self) -> int:
        """The cleanable bytes of the uncleanable logs (Kafka's uncleanable-bytes)."""
        with self._lock:
            uncleanable = list(self._uncleanable)
            checkpoints = self.checkpoints()
        total, now = 0, wall_clock_ms()
        for tp in uncleanable:
            partition_log = self.logs().get(tp)
            if partition_log is None:
                continue
            try:
                found, _ = self._weigh(tp, partition_log, checkpoints.get(tp), now)
            except Exception:
                continue
            total += found.cleanable_bytes if found is not None else 0
        return total
