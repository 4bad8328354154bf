"""The broker's keys for its dealings with the controller: its id, epoch confirmation, controlled shutdown."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least

__all__ = ["BROKER_ID", "CONTROLLER_KEYS"]

BROKER_ID = ConfigKey(
    "broker.id", "int", doc="this broker's id, at most `reserved.broker.max.id`", check=at_least(0)
)

CONTROLLER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "controller.epoch.confirmation.enable",
        "bool",
        True,
        doc="(not a Kafka key) accept a control request from a controller epoch above any seen only once "
        "ZooKeeper's `/controller` and `/controller_epoch` confirm it, so a forged frame cannot capture "
        "the broker",
    ),
    ConfigKey(
        "controlled.shutdown.enable",
        "bool",
        True,
        doc="on SIGTERM, ask the controller to move leadership away before stopping",
    ),
    ConfigKey(
        "controlled.shutdown.max.retries",
        "int",
        3,
        check=at_least(1),
        doc="attempts before shutting down anyway",
    ),
    ConfigKey(
        "controlled.shutdown.retry.backoff.ms",
        "int",
        5000,
        check=at_least(0),
        doc="pause between controlled-shutdown attempts",
    ),
    ConfigKey(
        "controller.socket.timeout.ms",
        "int",
        30000,
        check=at_least(1),
        doc="connect and request timeout towards the controller",
    ),
)
