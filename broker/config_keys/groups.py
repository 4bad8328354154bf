"""The broker's consumer-group keys: the coordinator of the groups whose offsets partition it leads."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["GROUP_KEYS"]

GROUP_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "offsets.topic.num.partitions",
        "int",
        50,
        check=at_least(1),
        doc="partitions of `__consumer_offsets` when it is created; fixed once it exists",
    ),
    ConfigKey(
        "offsets.topic.replication.factor",
        "int",
        3,
        check=at_least(1),
        doc="its replication factor, capped at the live brokers (with a warning)",
    ),
    ConfigKey(
        "offsets.commit.timeout.ms",
        "int",
        5000,
        check=at_least(1),
        doc="how long an offset commit or group write waits for the offsets partition's ISR",
    ),
    ConfigKey(
        "offset.metadata.max.bytes",
        "int",
        4096,
        check=at_least(0),
        doc="a commit with longer metadata gets OFFSET_METADATA_TOO_LARGE",
    ),
    ConfigKey(
        "offsets.retention.minutes",
        "int",
        10080,
        check=at_least(1),
        doc="committed offsets of groups without members expire after this long",
    ),
    ConfigKey(
        "offsets.retention.check.interval.ms",
        "int",
        600000,
        check=at_least(1),
        doc="how often offsets are checked for expiry",
    ),
    ConfigKey(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        check=at_least(0),
        doc="a new group waits this long for more members before its first assignment (KIP-134)",
    ),
    ConfigKey(
        "group.min.session.timeout.ms",
        "int",
        6000,
        check=at_least(1),
        doc="the shortest session timeout a member may ask for",
    ),
    ConfigKey(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        check=at_least(1),
        doc="the longest session timeout a member may ask for",
    ),
    ConfigKey(
        "group.max.size",
        "int",
        2147483647,
        check=at_least(1),
        doc="members a group may have (GROUP_MAX_SIZE_REACHED beyond)",
    ),
)
