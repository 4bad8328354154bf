"""The log cleaner's threads (Kafka's LogCleaner and CleanerThread): each cleans the dirtiest
compacted log, sleeps ``log.cleaner.backoff.ms`` when none is due, and reports what it did.

By default each thread cleans in a worker process of its own (``broker.cleaner.worker_client``), so
that the decoding and re-encoding do not hold the broker's GIL; the swaps stay here. ``in_process``
cleans in the thread itself (unit tests, benchmarks of the cleaner alone).

A cleaning that fails marks its log uncleanable (logged, counted by the metrics, a
``log_uncleanable`` event) and the thread goes on; an aborted one (the log was deleted or truncated,
or the broker is stopping) is simply dropped. So is one whose worker died, unless the same log's
cleanings killed the worker :data:`MAX_WORKER_DEATHS` times in a row (the OOM killer, a crash in a
native codec): then that log is marked uncleanable as a failed one is, so that it cannot take its
thread's every round. A thread whose workers fail to start :data:`MAX_START_FAILURES` times in a row
logs an error and cleans in its own process from then on: slower for the data plane, but the logs
are still compacted (simpler than a dead thread, which would leave them to grow). Only an error
outside any log's cleaning ends a thread, logged and counted as dead (Kafka's DeadThreadCount).
Stopping wakes sleeping threads, aborts their cleanings at the next batch and joins them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.cleaner.config import CleanerConfig
from broker.cleaner.manager import CleanerManager, LogToClean
from broker.cleaner.throttler import Throttler
from broker.cleaner.worker_client import CleanerWorker, WorkerDied, WorkerSettings, WorkerStartFailed
from broker.log import Log, LogClosed
from broker.log.compaction import Cleaner, CleanerStats, CleaningAborted
from broker.log.offset_map import OffsetMap
from broker.log.segment import wall_clock_ms
from zkstore.znodes import TopicPartition

__all__ = ["CleanerThread", "LogCleaner"]

log = logging.getLogger("broker.cleaner")


MAX_WORKER_DEATHS = 3
"""Worker deaths in a row during one log's cleanings after which the log is marked uncleanable."""
MAX_START_FAILURES = 3
"""Workers in a row that fail to start after which a thread cleans in its own process."""


class CleanerStopping(CleaningAborted):
    """The cleaner is shutting down: the cleaning in progress stops at the next batch."""


@dataclass
class CleanerThread:
    """One cleaning thread's state; :meth:`LogCleaner.clean_once` runs one round of its loop."""

    index: int
    cleaner: Cleaner | CleanerWorker
    current: list[TopicPartition]
    """The partition being cleaned (none or one): what the cleaner's abort checks look at."""
    last_stats: CleanerStats = field(default_factory=CleanerStats)
    last_compaction_delay_ms: int = 0
    thread: threading.Thread | None = None
    dead: bool = False
    start_failures: int = 0
    """Worker starts that failed in a row (reset by any round whose start did not fail)."""


class LogCleaner:
    """The cleaner of one log directory: ``start`` it with the partitions' high watermarks, ``stop`` it
    at shutdown, ``abort(tp)`` before a log is deleted."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dir: Path,
        logs: Callable[[], Mapping[TopicPartition, Log]],
        emit: Callable[..., Any] | None = None,
        *,
        high_watermark: Callable[[TopicPartition], int | None] = lambda tp: None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        in_process: bool = False,
    ) -> None:
        self.config = config
        self.in_process = in_process
        self.emit = emit
        self.clock_ms = clock_ms
        self._high_watermark = high_watermark
        self.manager = CleanerManager(log_dir, logs, lambda tp: self._high_watermark(tp))
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self._stopping = threading.Event()
        self.threads = [self._worker(i) for i in range(config.threads)]
        self.cleanings = 0
        """Cleanings completed since start (all threads)."""
        self._worker_deaths: dict[TopicPartition, int] = {}
        """Per log, the worker deaths in a row during its cleanings (only the thread cleaning the log
        touches its entry)."""

    def _worker(self, index: int) -> CleanerThread:
        holder: list[TopicPartition] = []

        def check_done() -> None:
            if self._stopping.is_set():
                raise CleanerStopping("the log cleaner is stopping")
            if holder:
                self.manager.check_aborted(holder[0])

        config = self.config
        if not self.in_process:
            # Each worker has a throttler of its own at rate / threads: the total holds when every
            # thread cleans, but unlike Kafka's shared throttler an idle thread's share is not lent to
            # the busy ones, so a lone cleaning gets only its share.
            rate = config.io_max_bytes_per_second / max(config.threads, 1)
            settings = WorkerSettings(
                config.map_memory, config.dedupe_buffer_load_factor, config.thread_io_buffer_size, rate
            )
            return CleanerThread(index, CleanerWorker(settings, check_done), holder)
        return CleanerThread(index, self._in_process_cleaner(check_done), holder)

    def _in_process_cleaner(self, check_done: Callable[[], None]) -> Cleaner:
        config = self.config
        return Cleaner(
            OffsetMap(config.map_memory, config.dedupe_buffer_load_factor),
            io_buffer_size=config.thread_io_buffer_size,
            throttle=self.throttler.maybe_throttle,
            check_done=check_done,
        )

    # -- lifetime

    def start(self, high_watermark: Callable[[TopicPartition], int | None]) -> None:
        """Start the threads; ``high_watermark`` bounds what each partition's cleaning may reach."""
        self._high_watermark = high_watermark
        self._stopping.clear()
        for worker in self.threads:
            worker.thread = threading.Thread(
                target=self._run, args=(worker,), name=f"kafka-log-cleaner-thread-{worker.index}", daemon=True
            )
            worker.thread.start()
        log.info("log cleaner started: %d thread(s)", len(self.threads))

    def stop(self) -> None:
        """Stop the threads (aborting their cleanings) and end their worker processes."""
        self._stopping.set()
        for worker in self.threads:
            if worker.thread is not None:
                worker.thread.join()
                worker.thread = None
            if isinstance(worker.cleaner, CleanerWorker):
                worker.cleaner.close()

    def abort(self, tp: TopicPartition, *, forget: bool = False) -> None:
        """Abort the cleaning of ``tp`` (if any) and wait for it; ``forget``: the log is deleted."""
        self.manager.abort(tp, forget=forget)
        if forget:
            self._worker_deaths.pop(tp, None)

    def _run(self, worker: CleanerThread) -> None:
        try:
            while not self._stopping.is_set():
                if not self.clean_once(worker):
                    self._stopping.wait(self.config.backoff_ms / 1000.0)
        except Exception:
            worker.dead = True
            log.exception("log cleaner thread %d died", worker.index)

    # -- one round

    def clean_once(self, worker: CleanerThread | None = None, *, now_ms: int | None = None) -> bool:
        """Clean the dirtiest log due, if any; True if one was cleaned (tests call it directly)."""
        worker = worker or self.threads[0]
        now = self.clock_ms() if now_ms is None else now_ms
        chosen, delay = self.manager.grab_filthiest(now)
        worker.last_compaction_delay_ms = delay
        if chosen is None:
            return False
        current = worker.current
        current[:] = [chosen.tp]
        end_offset = None
        start_failures, worker.start_failures = worker.start_failures, 0  # kept if this start fails too
        try:
            end_offset, stats = worker.cleaner.clean(
                chosen.log, chosen.first_dirty, chosen.first_uncleanable, now
            )
            worker.last_stats = stats
            self.cleanings += 1
            self._worker_deaths.pop(chosen.tp, None)
            self._report(chosen, end_offset, stats)
        except WorkerStartFailed as exc:
            worker.start_failures = start_failures + 1
            self._start_failed(worker, chosen, exc)
        except WorkerDied as exc:
            self._worker_died(chosen, exc)
        except CleaningAborted as exc:
            log.info("%s: cleaning aborted: %s", chosen.log.topic_partition, exc)
        except Exception as exc:
            if _changed(chosen):  # what failed was reading a log cut or deleted meanwhile
                log.info("%s: cleaning aborted: the log changed (%s)", chosen.log.topic_partition, exc)
            else:
                log.exception("%s: cleaning failed: marked uncleanable", chosen.log.topic_partition)
                self._mark_uncleanable(chosen, repr(exc))
        finally:
            current.clear()
            self.manager.done(chosen, end_offset)
        return end_offset is not None

    def _mark_uncleanable(self, chosen: LogToClean, error: str) -> None:
        self._worker_deaths.pop(chosen.tp, None)
        self.manager.mark_uncleanable(chosen.tp)
        if self.emit is not None:
            self.emit("log_uncleanable", topic_partition=chosen.log.topic_partition, error=error)

    def _worker_died(self, chosen: LogToClean, exc: WorkerDied) -> None:
        """Count a worker death during ``chosen``'s cleaning; the :data:`MAX_WORKER_DEATHS`-th in a row
        marks the log uncleanable (a completed cleaning of the log starts the count again)."""
        deaths = self._worker_deaths.get(chosen.tp, 0) + 1
        name = chosen.log.topic_partition
        if deaths < MAX_WORKER_DEATHS:
            self._worker_deaths[chosen.tp] = deaths
            log.warning("%s: cleaning aborted (worker death %d in a row): %s", name, deaths, exc)
            return
        reason = f"its cleanings killed the cleaner worker {deaths} times in a row; the last: {exc}"
        log.error("%s: cleaning failed: marked uncleanable: %s", name, reason)
        self._mark_uncleanable(chosen, reason)

    def _start_failed(self, worker: CleanerThread, chosen: LogToClean, exc: WorkerStartFailed) -> None:
        """A worker failed to start; the :data:`MAX_START_FAILURES`-th in a row turns the thread to
        cleaning in its own process (logged once: no worker is started after)."""
        log.warning("%s: cleaning dropped: %s", chosen.log.topic_partition, exc)
        if worker.start_failures < MAX_START_FAILURES or not isinstance(worker.cleaner, CleanerWorker):
            return
        log.error(
            "log cleaner thread %d: %d cleaner workers in a row failed to start (the last: %s): "
            "it cleans in the broker's process from now on",
            worker.index,
            worker.start_failures,
            exc,
        )
        worker.cleaner.close()
        worker.cleaner = self._in_process_cleaner(worker.cleaner.check_done)

    def _report(self, cleaned: LogToClean, end_offset: int, stats: CleanerStats) -> None:
        log.info(
            "%s: cleaned [%d, %d): %d bytes read, %d written, %d of %d records kept in %.3f s "
            "(map %.1f%% full)",
            cleaned.log.topic_partition, cleaned.first_dirty, end_offset, stats.bytes_read,
            stats.bytes_written, stats.records_written, stats.records_read, stats.elapsed_s,
            100 * stats.buffer_utilization,
        )  # fmt: skip
        if self.emit is not None:
            self.emit(
                "log_cleaned",
                topic_partition=cleaned.log.topic_partition,
                start_offset=cleaned.first_dirty,
                end_offset=end_offset,
                bytes_read=stats.bytes_read,
                bytes_written=stats.bytes_written,
                records_kept=stats.records_written,
                records_removed=stats.records_read - stats.records_written,
                compressed_batches_kept=stats.compressed_batches_kept,
                seconds=round(stats.elapsed_s, 3),
            )

    # -- what the metrics read (Kafka's gauges)

    def max_buffer_utilization_percent(self) -> float:
        return max((100 * w.last_stats.buffer_utilization for w in self.threads), default=0.0)

    def recopy_percent(self) -> float:
        read = sum(w.last_stats.bytes_read for w in self.threads)
        written = sum(w.last_stats.bytes_written for w in self.threads)
        return float(int(100 * written / max(read, 1)))

    def max_clean_secs(self) -> float:
        return max((w.last_stats.elapsed_s for w in self.threads), default=0.0)

    def max_compaction_delay_secs(self) -> float:
        return max((w.last_compaction_delay_ms for w in self.threads), default=0) / 1000.0

    def dead_threads(self) -> int:
        return sum(w.dead for w in self.threads)

    def max_dirty_percent(self) -> float:
        return float(int(100 * self.manager.dirtiest_ratio))

    def time_since_last_run_ms(self) -> float:
        return float(wall_clock_ms() - self.manager.last_run_ms)


def _changed(chosen: LogToClean) -> bool:
    """Whether the log was truncated or closed since it was chosen."""
    try:
        return chosen.log.cleaning_view().truncations != chosen.truncations
    except LogClosed:
        return True
