"""StopReplica (key 5): v1 as Apache Kafka defines it (KIP-380), v4 as seed 002 defines it.

The seed's v4 is v1's layout with ``max_broker_epoch`` in place of ``broker_epoch``.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS, epoch_field
from protocol.types import Bool, Int16, Int32, Int64, KArray, KString, KStruct


def request(version: int) -> Construct:
    return KStruct(
        "controller_id" / Int32,
        "controller_epoch" / Int32,
        epoch_field(ApiKey.STOP_REPLICA, version) / Int64,
        "delete_partitions" / Bool,
        "topics" / KArray(KStruct("name" / KString(), "partition_indexes" / KArray(Int32))),
    )


def response(version: int) -> Construct:
    return KStruct(
        "error_code" / Int16,
        "partition_errors"
        / KArray(KStruct("topic_name" / KString(), "partition_index" / Int32, "error_code" / Int16)),
    )


SPEC = ApiSpec(
    key=ApiKey.STOP_REPLICA,
    name="StopReplica",
    versions=(PER_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA], MAX_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA]),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
