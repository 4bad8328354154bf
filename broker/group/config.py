"""The group coordinator's settings, with Kafka's config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
"""A new member must complete its first join within five minutes (Kafka's fixed value)."""


@dataclass(frozen=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    """offsets.topic.num.partitions"""
    offsets_topic_replication_factor: int = 3
    """offsets.topic.replication.factor (capped at the live brokers, with a warning)"""
    offsets_topic_segment_bytes: int = 104857600
    """offsets.topic.segment.bytes"""
    offsets_commit_timeout_ms: int = 5000
    """offsets.commit.timeout.ms: how long a commit waits for the offsets partition's ISR"""
    offset_metadata_max_bytes: int = 4096
    """offset.metadata.max.bytes"""
    offsets_retention_minutes: int = 10080
    """offsets.retention.minutes"""
    offsets_retention_check_interval_ms: int = 600000
    """offsets.retention.check.interval.ms"""
    group_initial_rebalance_delay_ms: int = 3000
    """group.initial.rebalance.delay.ms (KIP-134)"""
    group_min_session_timeout_ms: int = 6000
    """group.min.session.timeout.ms"""
    group_max_session_timeout_ms: int = 1800000
    """group.max.session.timeout.ms"""
    group_max_size: int = 2147483647
    """group.max.size"""
