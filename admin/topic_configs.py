"""Topic-level configs as Kafka checks them: the names it knows, and the values it accepts.

Pure: CreateTopics and the config APIs check a request with it before anything reaches ZooKeeper, the
CLI before it writes, and a broker again when it reads overrides someone else wrote
(``broker.topic_configs`` applies them to its logs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admin.errors import AdminFailure
from protocol import ErrorCode

__all__ = [
    "KAFKA_TOPIC_CONFIG_NAMES",
    "TOPIC_CONFIGS",
    "InvalidTopicConfig",
    "TopicConfig",
    "check_configs",
    "check_value",
    "cleanup_policies",
]

KAFKA_TOPIC_CONFIG_NAMES = frozenset(
    {
        "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
        "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
        "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
        "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
        "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
        "preallocate", "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
        "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
    }
)  # fmt: skip
"""Kafka's topic-level config names: anything else is INVALID_CONFIG, as Kafka's LogConfig says."""


@dataclass(frozen=True)
class TopicConfig:
    """One topic-level config this cluster applies: its broker-wide synonym and how it is checked."""

    name: str
    broker_key: str
    """The broker config whose value holds when the topic has no override (Kafka's synonym)."""
    kind: str
    """``long``, ``int``, ``double``, ``string`` or ``boolean``, as Kafka's ConfigDef types it."""
    minimum: int | None = None
    maximum: int | None = None


TOPIC_CONFIGS: dict[str, TopicConfig] = {
    c.name: c
    for c in (
        TopicConfig("cleanup.policy", "log.cleanup.policy", "list"),
        TopicConfig("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", "double", 0, 1),
        TopicConfig("delete.retention.ms", "log.cleaner.delete.retention.ms", "long", minimum=0),
        TopicConfig("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "long", minimum=0),
        TopicConfig("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "long", minimum=1),
        TopicConfig("retention.ms", "log.retention.ms", "long", minimum=-1),
        TopicConfig("retention.bytes", "log.retention.bytes", "long", minimum=-1),
        TopicConfig("segment.bytes", "log.segment.bytes", "int", minimum=14),
        TopicConfig("segment.ms", "log.roll.ms", "long", minimum=1),
        TopicConfig("max.message.bytes", "message.max.bytes", "int", minimum=0),
        TopicConfig("index.interval.bytes", "log.index.interval.bytes", "int", minimum=0),
        TopicConfig("min.insync.replicas", "min.insync.replicas", "int", minimum=1),
        TopicConfig("unclean.leader.election.enable", "unclean.leader.election.enable", "boolean"),
    )
}
"""The topic configs DescribeConfigs lists; Kafka's other topic config names are accepted and stored."""


class InvalidTopicConfig(ValueError):
    """A value Kafka would refuse with INVALID_CONFIG; the message names the key."""


def check_value(name: str, value: str) -> None:
    """Refuse a value of a config in :data:`TOPIC_CONFIGS` as Kafka's ConfigDef would; others pass."""
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        return
    if spec.kind in ("long", "int", "double"):
        try:
            number = float(value) if spec.kind == "double" else int(value)
        except ValueError:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: Not a number"
            ) from None
        if spec.minimum is not None and number < spec.minimum:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: must be at least {spec.minimum}"
            )
        if spec.maximum is not None and number > spec.maximum:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: must be no more than {spec.maximum}"
            )
    elif spec.kind == "boolean" and value.lower() not in ("true", "false"):
        raise InvalidTopicConfig(
            f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
        )
    if name == "cleanup.policy" and not cleanup_policies(value) <= {"delete", "compact"}:
        raise InvalidTopicConfig(f"Invalid value {value} for configuration cleanup.policy")


def cleanup_policies(value: str) -> set[str]:
    """The policies a ``cleanup.policy`` value lists (``{""}`` for none, which Kafka refuses)."""
    return {p.strip() for p in value.split(",") if p.strip()} or {""}


def check_configs(configs: Mapping[str, str | None]) -> None:
    """A topic's configs as a request gives them: AdminFailure(INVALID_CONFIG) for the first one Kafka
    refuses, or for ``min.compaction.lag.ms`` above ``max.compaction.lag.ms`` (Kafka's LogConfig
    check; a lag the request does not give counts at its default here)."""
    for name, value in configs.items():
        if value is None:
            raise AdminFailure(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}"
            )
        if name not in KAFKA_TOPIC_CONFIG_NAMES:
            raise AdminFailure(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        try:
            check_value(name, value)
        except InvalidTopicConfig as exc:
            raise AdminFailure(ErrorCode.INVALID_CONFIG, str(exc)) from None
    min_lag = int(configs.get("min.compaction.lag.ms") or 0)
    max_lag = int(configs.get("max.compaction.lag.ms") or 2**63 - 1)
    if min_lag > max_lag:
        raise AdminFailure(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
        )
