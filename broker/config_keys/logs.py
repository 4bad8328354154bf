"""The broker's log keys: where partition logs live, how segments roll, retention, producer state."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["LOG_DIRS", "LOG_KEYS", "PRODUCER_ID_EXPIRATION_MS"]

LOG_DIRS = ConfigKey(
    "log.dirs",
    "list",
    None,
    aliases=("log.dir",),
    shown_default="`/tmp/kafka-logs-<broker.id>`",
    doc="the data directory: partition logs, checkpoints and `events.jsonl` (one directory only)",
)

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
)
"""Segments, retention, indexes, recovery checkpoints and the largest batch."""

PRODUCER_ID_EXPIRATION_MS = ConfigKey(
    "producer.id.expiration.ms",
    "int",
    86400000,
    check=at_least(1),
    doc="an idempotent producer's state is dropped after this long without a write (KIP-854)",
)
