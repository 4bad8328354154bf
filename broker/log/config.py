"""A partition log's settings: the broker's log keys, or a topic's overrides of them."""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

__all__ = ["DAY_MS", "LONG_MAX", "LogConfig"]

DAY_MS = 24 * 3600 * 1000
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    """log.segment.bytes"""
    segment_ms: int = 7 * DAY_MS
    """log.roll.ms / log.roll.hours"""
    index_interval_bytes: int = 4096
    """log.index.interval.bytes"""
    retention_ms: int = 7 * DAY_MS
    """log.retention.ms; -1: no time limit"""
    retention_bytes: int = -1
    """log.retention.bytes; -1: no size limit"""
    max_batch_bytes: int = 1048588
    """message.max.bytes: a leader refuses a bigger batch"""
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    """producer.id.expiration.ms: an idle producer's state is dropped after this long"""
    delete: bool = True
    """``delete`` in cleanup.policy: time and size retention apply"""
    compact: bool = False
    """``compact`` in cleanup.policy: the log cleaner keeps the latest record of each key"""
    min_cleanable_ratio: float = 0.5
    """min.cleanable.dirty.ratio: the dirty share of the log above which it is cleaned"""
    delete_retention_ms: int = DAY_MS
    """delete.retention.ms: how long tombstones and transaction markers outlive their first cleaning"""
    min_compaction_lag_ms: int = 0
    """min.compaction.lag.ms: a record younger than this is never cleaned"""
    max_compaction_lag_ms: int = LONG_MAX
    """max.compaction.lag.ms: a dirty record older than this makes its log cleanable at any ratio"""
