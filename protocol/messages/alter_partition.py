"""AlterPartition (key 56) v0-v3, flexible in every version.

v1 adds ``leader_recovery_state``; v2 names topics by id and may answer INELIGIBLE_REPLICA (KIP-841);
v3 replaces ``new_isr`` with ``new_isr_with_epochs``, each ISR member with its broker epoch (KIP-903),
and answers as v2 does.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Int64, Layout, Uuid, only

FIRST_TOPIC_ID_VERSION = 2
FIRST_ISR_EPOCHS_VERSION = 3


def _topic_key(k: Layout, version: int) -> Construct:
    return "topic_id" / Uuid if version >= FIRST_TOPIC_ID_VERSION else "topic_name" / k.string()


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    partition = k.struct(
        "partition_index" / Int32,
        "leader_epoch" / Int32,
        *only(version < FIRST_ISR_EPOCHS_VERSION, "new_isr" / k.array(Int32)),
        *only(
            version >= FIRST_ISR_EPOCHS_VERSION,
            "new_isr_with_epochs" / k.array(k.struct("broker_id" / Int32, "broker_epoch" / Int64)),
        ),
        *only(version >= 1, "leader_recovery_state" / Int8),
        "partition_epoch" / Int32,
    )
    return k.struct(
        "broker_id" / Int32,
        "broker_epoch" / Int64,
        "topics" / k.array(k.struct(_topic_key(k, version), "partitions" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    partition = k.struct(
        "partition_index" / Int32,
        "error_code" / Int16,
        "leader_id" / Int32,
        "leader_epoch" / Int32,
        "isr" / k.array(Int32),
        *only(version >= 1, "leader_recovery_state" / Int8),
        "partition_epoch" / Int32,
    )
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "topics" / k.array(k.struct(_topic_key(k, version), "partitions" / k.array(partition))),
    )


SPEC = ApiSpec(
    key=ApiKey.ALTER_PARTITION,
    name="AlterPartition",
    versions=(0, 1, 2, 3),
    flexible_versions=frozenset({0, 1, 2, 3}),
    request=request,
    response=response,
)
