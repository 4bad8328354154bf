"""The keys for what a topic request leaves open, read by every daemon that serves topic requests."""

from __future__ import annotations

from admin.topic_requests import TopicDefaults
from daemon.config import ConfigKey, LoadedConfig, at_least

__all__ = ["TOPIC_DEFAULT_KEYS", "topic_defaults"]

TOPIC_DEFAULT_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "auto.create.topics.enable",
        "bool",
        True,
        doc="a Metadata request for an unknown topic creates it (unless the request says not to)",
    ),
    ConfigKey(
        "num.partitions", "int", 1, check=at_least(1), doc="partitions of a topic created without a count"
    ),
    ConfigKey(
        "default.replication.factor",
        "int",
        1,
        check=at_least(1),
        doc="replication factor of a topic created without one",
    ),
)


def topic_defaults(loaded: LoadedConfig) -> TopicDefaults:
    """The defaults ``loaded`` gives, with its ``delete.topic.enable`` (each daemon documents its own)."""
    return TopicDefaults(
        auto_create=loaded["auto.create.topics.enable"],
        num_partitions=loaded["num.partitions"],
        replication_factor=loaded["default.replication.factor"],
        delete_topic_enable=loaded["delete.topic.enable"],
    )
