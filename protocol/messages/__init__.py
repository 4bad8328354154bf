"""One module per API, each declaring its request and response schemas as functions of the version.

The two epoch protocols of the control requests are described here once: KIP-380's per-broker
``broker_epoch`` versions and seed 002's ``max_broker_epoch`` versions, which reuse the same layout;
so are the versions Apache Kafka 3.9 (IBP 3.9) speaks on the control plane.
"""

from __future__ import annotations

from protocol.api import DEFAULT_DIALECT, ApiKey, WireDialect

PER_BROKER_EPOCH_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: 2,
    ApiKey.UPDATE_METADATA: 5,
    ApiKey.STOP_REPLICA: 1,
}
"""KIP-380's versions, Apache Kafka's layouts in both dialects: each carries the target's ``broker_epoch``."""

MAX_BROKER_EPOCH_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: 5,
    ApiKey.UPDATE_METADATA: 7,
    ApiKey.STOP_REPLICA: 4,
}
"""Seed 002's versions, in the SEED dialect only: the per-broker versions' layouts with
``max_broker_epoch`` in place of ``broker_epoch``."""

KAFKA_3_9_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: 7,
    ApiKey.UPDATE_METADATA: 8,
    ApiKey.STOP_REPLICA: 4,
    ApiKey.ALTER_PARTITION: 3,
    ApiKey.CONTROLLED_SHUTDOWN: 3,
}
"""What Apache Kafka 3.9 at IBP 3.9 sends on the control plane (``reference/kafka-3.9-interop.md``):
flexible versions carrying ``broker_epoch``. StopReplica v4 is Kafka's layout only in the KAFKA
dialect; LeaderAndIsr v7 and UpdateMetadata v8 read the same in both."""


def uses_max_broker_epoch(api_key: ApiKey, version: int, dialect: WireDialect = DEFAULT_DIALECT) -> bool:
    """Whether ``version`` of a control request is a seed 002 variant in ``dialect``."""
    return dialect is WireDialect.SEED and MAX_BROKER_EPOCH_VERSIONS.get(api_key) == version


def epoch_field(api_key: ApiKey, version: int, dialect: WireDialect = DEFAULT_DIALECT) -> str:
    """The body key of a control request's int64 epoch: ``max_broker_epoch`` in the seed versions
    (SEED dialect), ``broker_epoch`` in every layout of Apache Kafka's."""
    return "max_broker_epoch" if uses_max_broker_epoch(api_key, version, dialect) else "broker_epoch"
