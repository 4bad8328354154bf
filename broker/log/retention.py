"""Which of a log's oldest segments time and size retention delete (Kafka's deleteRetentionMsBreached
and deleteRetentionSizeBreached segments), decided without touching them."""

from __future__ import annotations

from collections.abc import Sequence

from broker.log.config import LogConfig
from broker.log.segment import Segment

__all__ = ["expired_count"]


def expired_count(segments: Sequence[Segment], config: LogConfig, now_ms: int, high_watermark: int) -> int:
    """How many of the oldest ``segments`` are past ``retention.ms`` or beyond ``retention.bytes``:
    never the active one nor one holding offsets at or above ``high_watermark``, and none unless
    ``delete`` is in the log's cleanup.policy (Kafka's rule)."""
    if not config.delete:
        return 0

    def deletable(i: int) -> bool:
        return i < len(segments) - 1 and segments[i + 1].base_offset <= high_watermark

    count = 0
    if config.retention_ms >= 0:
        oldest_kept = now_ms - config.retention_ms
        while deletable(count) and segments[count].largest_timestamp() < oldest_kept:
            count += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments[count:]) - config.retention_bytes
        while deletable(count) and excess - segments[count].size >= 0:
            excess -= segments[count].size
            count += 1
    return count
