"""The broker's transaction keys: the coordinator of the transactional ids whose state partition it leads."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["TRANSACTION_KEYS"]

TRANSACTION_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "transaction.state.log.num.partitions",
        "int",
        50,
        check=at_least(1),
        doc="partitions of `__transaction_state` when it is created; fixed once it exists",
    ),
    ConfigKey(
        "transaction.state.log.replication.factor",
        "int",
        3,
        check=at_least(1),
        doc="its replication factor, capped at the live brokers (with a warning)",
    ),
    ConfigKey(
        "transaction.state.log.min.isr",
        "int",
        2,
        check=at_least(1),
        doc="its `min.insync.replicas`, capped at its replication factor (with a warning)",
    ),
    ConfigKey(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        check=at_least(1),
        doc="its segment size",
    ),
    ConfigKey(
        "transaction.max.timeout.ms",
        "int",
        900000,
        check=at_least(1),
        doc="a producer asking for a longer transaction timeout gets INVALID_TRANSACTION_TIMEOUT",
    ),
    ConfigKey(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        check=at_least(1),
        doc="a transactional id without a transaction for this long is forgotten",
    ),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        check=at_least(1),
        doc="how often transactions past their timeout are looked for and aborted",
    ),
    ConfigKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        check=at_least(1),
        doc="how often expired transactional ids are looked for",
    ),
)
