"""Every partition log in the log directory: loaded (and recovered) at start-up, created on demand,
deleted with the topic, checkpointed, trimmed by retention and compacted by the log cleaner
(``broker.cleaner``, started with :meth:`LogManager.start_cleaner`) (Kafka's LogManager).

A partition's log lives in ``<log.dir>/<topic>-<partition>/``. Two checkpoint files beside them, in
Kafka's text format, say where recovery must start (``recovery-point-offset-checkpoint``: everything
before was flushed) and where each log now starts (``log-start-offset-checkpoint``). A clean
shutdown flushes every log and writes both, so the next start recovers nothing.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from broker.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from broker.cleaner import CleanerConfig, LogCleaner
from broker.log import Log, LogConfig
from broker.log.partition_metadata import read_topic_id, write_topic_id
from daemon.eventlog import EventLog
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.log_manager")

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def partition_of(directory: Path) -> TopicPartition | None:
    """The partition a log directory holds, from its ``<topic>-<partition>`` name (None if not one)."""
    match = _PARTITION_DIR.match(directory.name)
    if match is None:
        return None
    return TopicPartition(match["topic"], int(match["partition"]))


def _read(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offsets(path)
    except CorruptCheckpoint as exc:
        log.error("ignoring a corrupt checkpoint (recovery starts from the beginning): %s", exc)
        return {}


class LogManager:
    def __init__(
        self, log_dir: Path, config: LogConfig, events: EventLog, cleaner: CleanerConfig | None = None
    ) -> None:
        self.log_dir = log_dir
        self.config = config
        self.events = events
        self.cleaner_config = cleaner or CleanerConfig()
        self.cleaner = LogCleaner(self.cleaner_config, log_dir, self.logs, events.emit)
        """Compacts the logs with ``compact`` in their cleanup.policy, once :meth:`start_cleaner` ran."""
        self._topic_configs: dict[str, LogConfig] = {}
        """Topics with overrides (``/config/topics``) -> their logs' settings."""
        self._logs: dict[TopicPartition, Log] = {}
        self._topic_ids: dict[TopicPartition, uuid.UUID] = {}
        """What each log's ``partition.metadata`` records, read once (at start-up or creation)."""
        self._lock = threading.Lock()

    def load(self) -> int:
        """Open (and recover) every log already on disk; returns how many."""
        recovery_points = _read(self.log_dir / RECOVERY_POINT_FILE)
        start_offsets = _read(self.log_dir / LOG_START_OFFSET_FILE)
        started = time.monotonic()
        for directory in sorted(p for p in self.log_dir.iterdir() if p.is_dir()):
            tp = partition_of(directory)
            if tp is None:
                continue
            opened = Log.open(
                directory,
                self.config_for(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp),
                emit=self.events.emit,
            )
            recorded = read_topic_id(directory)
            with self._lock:
                self._logs[tp] = opened
                if recorded is not None:
                    self._topic_ids[tp] = recorded
        with self._lock:
            count = len(self._logs)
        self.events.emit(
            "logs_loaded", logs=count, seconds=round(time.monotonic() - started, 3), log_dir=str(self.log_dir)
        )
        return count

    def logs(self) -> dict[TopicPartition, Log]:
        """Every log open here, at this instant."""
        with self._lock:
            return dict(self._logs)

    def start_cleaner(self, high_watermark: Callable[[TopicPartition], int | None]) -> None:
        """Start the log cleaner's threads (if log.cleaner.enable): a partition is cleaned up to its
        ``high_watermark`` at most, and not at all while it has none."""
        if self.cleaner_config.enable:
            self.cleaner.start(high_watermark)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.config)

    def set_topic_config(self, topic: str, config: LogConfig) -> int:
        """A topic's settings changed: its logs use them from their next append, roll and retention
        check on, and logs created later start with them. Returns how many logs were reconfigured."""
        with self._lock:
            if config == self.config:
                self._topic_configs.pop(topic, None)
            else:
                self._topic_configs[topic] = config
            logs = [lg for tp, lg in self._logs.items() if tp.topic == topic]
        for partition_log in logs:
            partition_log.reconfigure(config)
        return len(logs)

    def sizes(self) -> dict[TopicPartition, int]:
        """Each log's size in bytes (DescribeLogDirs)."""
        with self._lock:
            logs = dict(self._logs)
        return {tp: partition_log.size_bytes for tp, partition_log in logs.items()}

    def get(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    def get_or_create(self, tp: TopicPartition) -> Log:
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            directory = self.log_dir / f"{tp.topic}-{tp.partition}"
            created = Log.open(directory, self.config_for(tp.topic), emit=self.events.emit)
            self._logs[tp] = created
            recorded = read_topic_id(directory)
            if recorded is not None:
                self._topic_ids[tp] = recorded
        self.events.emit("log_created", topic=tp.topic, partition=tp.partition)
        return created

    def topic_id(self, tp: TopicPartition) -> uuid.UUID | None:
        """The topic id the partition's log records (``partition.metadata``); None without a log or id."""
        with self._lock:
            return self._topic_ids.get(tp)

    def assign_topic_id(self, tp: TopicPartition, topic_id: uuid.UUID) -> None:
        """Record the topic id in the partition's log directory, as Kafka's logs do (KIP-516)."""
        existing = self.get(tp)
        if existing is None:
            return
        write_topic_id(existing.directory, topic_id)
        with self._lock:
            self._topic_ids[tp] = topic_id

    def delete(self, tp: TopicPartition) -> bool:
        with self._lock:
            removed = self._logs.pop(tp, None)
            self._topic_ids.pop(tp, None)
        if removed is None:
            return False
        self.cleaner.abort(tp, forget=True)
        removed.delete()
        self.events.emit("log_deleted", topic=tp.topic, partition=tp.partition)
        return True

    def checkpoint(self) -> None:
        """Write every log's recovery point and start offset."""
        with self._lock:
            logs = dict(self._logs)
        write_offsets(self.log_dir / RECOVERY_POINT_FILE, {tp: lg.recovery_point for tp, lg in logs.items()})
        write_offsets(
            self.log_dir / LOG_START_OFFSET_FILE, {tp: lg.log_start_offset for tp, lg in logs.items()}
        )

    def apply_retention(self, high_watermark: Callable[[TopicPartition], int | None]) -> int:
        """Delete expired or excess segments below each partition's high watermark; returns how many."""
        now_ms = int(time.time() * 1000)
        with self._lock:
            logs = dict(self._logs)
        deleted = 0
        for tp, partition_log in logs.items():
            hw = high_watermark(tp)
            if hw is None:
                continue
            count = partition_log.delete_old_segments(now_ms, hw)
            if count:
                deleted += count
                self.events.emit(
                    "log_retention",
                    topic=tp.topic,
                    partition=tp.partition,
                    segments_deleted=count,
                    log_start_offset=partition_log.log_start_offset,
                )
        return deleted

    def remove_expired_producers(self) -> int:
        """Forget idle idempotent producers in every log (producer.id.expiration.ms); returns how many."""
        with self._lock:
            logs = list(self._logs.values())
        return sum(partition_log.remove_expired_producers() for partition_log in logs)

    def shutdown(self) -> None:
        """Stop the cleaner, flush and close every log, then checkpoint: the next start has nothing
        to recover."""
        self.cleaner.stop()
        with self._lock:
            logs = dict(self._logs)
        for partition_log in logs.values():
            partition_log.flush()
        self.checkpoint()
        for partition_log in logs.values():
            partition_log.close()
