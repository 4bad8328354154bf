"""LeaderAndIsr (key 4): v2 as Apache Kafka defines it (KIP-380), v5 as seed 002 defines it.

The seed's v5 is v2's layout with ``broker_epoch`` replaced, in place, by ``max_broker_epoch``: the
largest epoch among live brokers, so one encoded request can serve every broker. It is not
Apache Kafka's v5 (a flexible version with topic ids); see docs/protocol.md.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS, epoch_field
from protocol.types import Bool, Int16, Int32, Int64, KArray, KString, KStruct


def request(version: int) -> Construct:
    partition_state = KStruct(
        "partition_index" / Int32,
        "controller_epoch" / Int32,
        "leader" / Int32,
        "leader_epoch" / Int32,
        "isr" / KArray(Int32),
        "partition_epoch" / Int32,
        "replicas" / KArray(Int32),
        "is_new" / Bool,
    )
    return KStruct(
        "controller_id" / Int32,
        "controller_epoch" / Int32,
        epoch_field(ApiKey.LEADER_AND_ISR, version) / Int64,
        "topic_states"
        / KArray(KStruct("topic_name" / KString(), "partition_states" / KArray(partition_state))),
        "live_leaders" / KArray(KStruct("broker_id" / Int32, "host_name" / KString(), "port" / Int32)),
    )


def response(version: int) -> Construct:
    return KStruct(
        "error_code" / Int16,
        "partition_errors"
        / KArray(KStruct("topic_name" / KString(), "partition_index" / Int32, "error_code" / Int16)),
    )


SPEC = ApiSpec(
    key=ApiKey.LEADER_AND_ISR,
    name="LeaderAndIsr",
    versions=(
        PER_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR],
        MAX_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR],
    ),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
