"""The broker's keys for its dealings with the controller: its id, the control-plane wire, epoch
confirmation, controlled shutdown."""

from __future__ import annotations

from daemon.config import ConfigKey, at_least
from protocol.ibp import DEFAULT_IBP, control_wire

__all__ = ["BROKER_ID", "BROKER_RACK", "CONTROLLER_KEYS", "INTER_BROKER_PROTOCOL_VERSION"]

BROKER_ID = ConfigKey(
    "broker.id", "int", doc="this broker's id, at most `reserved.broker.max.id`", check=at_least(0)
)


BROKER_RACK = ConfigKey(
    "broker.rack",
    "string",
    None,
    doc="this broker's rack, published in its registration (`/brokers/ids/N`) for rack-aware replica "
    "placement, as Kafka's brokers publish theirs",
)


def _check_ibp(value: str) -> None:
    control_wire(value)  # ValueError naming the reason: the key is named by the loader


INTER_BROKER_PROTOCOL_VERSION = ConfigKey(
    "inter.broker.protocol.version",
    "string",
    DEFAULT_IBP,
    check=_check_ibp,
    doc="the control-plane wire this broker reads control requests in and sends AlterPartition and "
    "ControlledShutdown at: `2.2` Kafka's per-broker versions, `2.3-IV2` to `3.3` the seed's, `3.4` to "
    "`3.9` Apache Kafka 3.9's (`3.9` beside Kafka brokers); set it as on the controller "
    "([broker](broker.md#the-control-plane-wire))",
)

CONTROLLER_KEYS: tuple[ConfigKey, ...] = (
    INTER_BROKER_PROTOCOL_VERSION,
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
