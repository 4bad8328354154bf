"""A partition log's settings: the broker's log keys, or a topic's overrides of them."""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

__all__ = ["DAY_MS", "LogConfig"]

DAY_MS = 24 * 3600 * 1000


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
