"""The transaction coordinator's settings, with Kafka's config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50
    """transaction.state.log.num.partitions"""
    transaction_state_log_replication_factor: int = 3
    """transaction.state.log.replication.factor (capped at the live brokers, with a warning)"""
    transaction_state_log_min_isr: int = 2
    """transaction.state.log.min.isr (capped at the replication factor, with a warning)"""
    transaction_state_log_segment_bytes: int = 104857600
    """transaction.state.log.segment.bytes"""
    transaction_max_timeout_ms: int = 900000
    """transaction.max.timeout.ms: a producer asking for more gets INVALID_TRANSACTION_TIMEOUT"""
    transactional_id_expiration_ms: int = 604800000
    """transactional.id.expiration.ms: an idle transactional id is forgotten after this long"""
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    """transaction.abort.timed.out.transaction.cleanup.interval.ms"""
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    """transaction.remove.expired.transaction.cleanup.interval.ms"""
    log_write_timeout_ms: int = 30000
    """How long a transaction log write waits for the partition's ISR: Kafka's ``request.timeout.ms``
    default, which this broker does not read."""
