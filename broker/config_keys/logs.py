"""The broker's log keys: where partition logs live, how segments roll, retention, compaction,
producer state."""

from __future__ import annotations

from collections.abc import Callable

from daemon.config import ConfigKey, at_least

__all__ = ["CLEANUP_POLICIES", "LOG_CLEANER_KEYS", "LOG_DIRS", "LOG_KEYS", "PRODUCER_ID_EXPIRATION_MS"]

CLEANUP_POLICIES = frozenset({"compact", "delete"})

LOG_DIRS = ConfigKey(
    "log.dirs",
    "list",
    None,
    aliases=("log.dir",),
    shown_default="`/tmp/kafka-logs-<broker.id>`",
    doc="the data directory: partition logs, checkpoints and `events.jsonl` (one directory only)",
)


def double(low: float | None = None, high: float | None = None) -> Callable[[str], None]:
    """A check of a Kafka DOUBLE key, declared as a string (``daemon.config`` has no double type):
    the broker's config parses it with ``float``."""

    def check(value: str) -> None:
        number = float(value)
        if low is not None and number < low:
            raise ValueError(f"must be at least {low}")
        if high is not None and number > high:
            raise ValueError(f"must be no more than {high}")

    return check


def _policies(value: list[str]) -> None:
    if not value or not set(value) <= CLEANUP_POLICIES:
        raise ValueError("must be a list of compact and delete")


LOG_CLEANER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "log.cleanup.policy",
        "list",
        ["delete"],
        check=_policies,
        doc="`delete` (retention), `compact` (the log cleaner keeps each key's latest record) or both; "
        "topics override it with `cleanup.policy`",
    ),
    ConfigKey("log.cleaner.enable", "bool", True, doc="run the log cleaner, which compacts compacted topics"),
    ConfigKey("log.cleaner.threads", "int", 1, check=at_least(0), doc="log cleaner threads"),
    ConfigKey(
        "log.cleaner.dedupe.buffer.size",
        "long",
        134217728,
        check=at_least(0),
        doc="memory for the cleaners' key maps, all threads together: a cleaning stops where its map is full",
    ),
    ConfigKey(
        "log.cleaner.io.buffer.load.factor",
        "string",
        "0.9",
        check=double(0.0, 1.0),
        doc="how full a key map may get",
    ),
    ConfigKey(
        "log.cleaner.io.buffer.size",
        "int",
        524288,
        check=at_least(0),
        doc="the cleaners' read and write buffers, all threads together",
    ),
    ConfigKey(
        "log.cleaner.io.max.bytes.per.second",
        "string",
        "1.7976931348623157E308",
        check=double(),
        shown_default="`1.7976931348623157E308` (unlimited)",
        doc="the cleaners' reads and writes together stay below this rate on average",
    ),
    ConfigKey(
        "log.cleaner.backoff.ms",
        "long",
        15000,
        check=at_least(0),
        doc="how long a cleaner thread sleeps when no log needs cleaning",
    ),
    ConfigKey(
        "log.cleaner.min.cleanable.ratio",
        "string",
        "0.5",
        check=double(0.0, 1.0),
        doc="a log is cleaned once its dirty share is above this (topic: `min.cleanable.dirty.ratio`)",
    ),
    ConfigKey(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        check=at_least(0),
        doc="tombstones and transaction markers stay this long after their first cleaning "
        "(topic: `delete.retention.ms`)",
    ),
    ConfigKey(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        check=at_least(0),
        doc="a record younger than this is never cleaned (topic: `min.compaction.lag.ms`)",
    ),
    ConfigKey(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        9223372036854775807,
        check=at_least(1),
        doc="a dirty record older than this makes its log cleanable at any ratio "
        "(topic: `max.compaction.lag.ms`)",
    ),
)
"""The log cleaner (Kafka's CleanerConfig) and the broker-wide defaults of compacted topics."""


LOG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "log.segment.bytes",
        "int",
        1 << 30,
        check=at_least(1024),
        doc="a segment rolls when the next append would pass this size",
    ),
    ConfigKey(
        "log.roll.ms",
        "int",
        None,
        check=at_least(1),
        shown_default="`log.roll.hours`",
        doc="… or when its first record is this old",
    ),
    ConfigKey("log.roll.hours", "int", 168, check=at_least(1), doc="`log.roll.ms` in hours"),
    ConfigKey(
        "log.retention.ms",
        "int",
        None,
        check=at_least(-1),
        shown_default="`log.retention.minutes`",
        doc="segments whose newest record is older are deleted (-1: never); the most precise key set wins",
    ),
    ConfigKey(
        "log.retention.minutes",
        "int",
        None,
        check=at_least(-1),
        shown_default="`log.retention.hours`",
        doc="`log.retention.ms` in minutes",
    ),
    ConfigKey("log.retention.hours", "int", 168, check=at_least(-1), doc="`log.retention.ms` in hours"),
    ConfigKey(
        "log.retention.bytes",
        "int",
        -1,
        check=at_least(-1),
        doc="the oldest segments are deleted while a partition's log is larger (-1: no limit)",
    ),
    ConfigKey(
        "log.retention.check.interval.ms",
        "int",
        300000,
        check=at_least(1),
        doc="how often retention runs",
    ),
    ConfigKey(
        "log.index.interval.bytes",
        "int",
        4096,
        check=at_least(0),
        doc="bytes between two offset-index entries",
    ),
    ConfigKey(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        check=at_least(10),
        doc="how often recovery points and log start offsets are checkpointed",
    ),
    ConfigKey(
        "message.max.bytes",
        "int",
        1048588,
        check=at_least(0),
        doc="a larger record batch is refused with MESSAGE_TOO_LARGE",
    ),
    *LOG_CLEANER_KEYS,
)
"""Segments, retention, indexes, recovery checkpoints, the largest batch, and the log cleaner."""


PRODUCER_ID_EXPIRATION_MS = ConfigKey(
    "producer.id.expiration.ms",
    "int",
    86400000,
    check=at_least(1),
    doc="an idempotent producer's state is dropped after this long without a write (KIP-854)",
)
