"""The broker's keys for topics it creates: on first use, or through the Admin API without settings."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["TOPIC_KEYS"]

TOPIC_KEYS: tuple[ConfigKey, ...] = (
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
    ConfigKey(
        "delete.topic.enable",
        "bool",
        True,
        doc="DeleteTopics is served (false: TOPIC_DELETION_DISABLED); set it like the controller's",
    ),
)
