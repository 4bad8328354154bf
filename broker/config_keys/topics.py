"""The broker's keys for topics it creates: on first use, or through the Admin API without settings."""

from __future__ import annotations

from admin.config_keys import TOPIC_DEFAULT_KEYS
from daemon.config import ConfigKey

__all__ = ["TOPIC_KEYS"]

TOPIC_KEYS: tuple[ConfigKey, ...] = (
    *TOPIC_DEFAULT_KEYS,
    ConfigKey(
        "delete.topic.enable",
        "bool",
        True,
        doc="DeleteTopics is served (false: TOPIC_DELETION_DISABLED); set it like the controller's",
    ),
)
