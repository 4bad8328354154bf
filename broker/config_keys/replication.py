"""The broker's replication keys: the ISR, followers' fetches, and the high-watermark checkpoint."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["HW_CHECKPOINT_INTERVAL_MS", "NUM_REPLICA_FETCHERS", "REPLICATION_KEYS"]

HW_CHECKPOINT_INTERVAL_MS = ConfigKey(
    "replica.high.watermark.checkpoint.interval.ms",
    "int",
    5000,
    check=at_least(10),
    doc="how often `replication-offset-checkpoint` is written",
)

REPLICATION_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "min.insync.replicas",
        "int",
        1,
        check=at_least(1),
        doc="acks=all needs at least this many replicas in the ISR (NOT_ENOUGH_REPLICAS otherwise)",
    ),
    ConfigKey(
        "replica.lag.time.max.ms",
        "int",
        30000,
        check=at_least(1),
        doc="a follower not caught up for this long leaves the ISR",
    ),
    ConfigKey(
        "replica.fetch.max.bytes",
        "int",
        1048576,
        check=at_least(0),
        doc="per partition in a follower's fetch",
    ),
    ConfigKey(
        "replica.fetch.response.max.bytes",
        "int",
        10485760,
        check=at_least(0),
        doc="per follower fetch response",
    ),
    ConfigKey(
        "replica.fetch.wait.max.ms",
        "int",
        500,
        check=at_least(0),
        doc="how long a follower's fetch waits on the leader for data",
    ),
    ConfigKey(
        "replica.fetch.min.bytes",
        "int",
        1,
        check=at_least(1),
        doc="the bytes a follower's fetch waits for",
    ),
    ConfigKey(
        "replica.fetch.backoff.ms",
        "int",
        1000,
        check=at_least(0),
        doc="pause after a failed fetch",
    ),
    ConfigKey(
        "replica.socket.timeout.ms",
        "int",
        30000,
        check=at_least(1),
        doc="follower connect and request timeout",
    ),
)
"""The ISR's rules and how followers fetch from their leaders."""

NUM_REPLICA_FETCHERS = ConfigKey(
    "num.replica.fetchers",
    "int",
    1,
    check=at_least(1),
    doc="accepted for compatibility; there is always one fetcher thread per leader broker",
)
