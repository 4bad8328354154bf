"""AlterPartitionReassignments (key 45) v0, flexible (KIP-455): move partitions to new replicas, or
cancel a move in progress (null replicas)."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    partition = k.struct("partition_index" / Int32, "replicas" / k.array(Int32, nullable=True))
    topic = k.struct("name" / k.string(), "partitions" / k.array(partition))
    return k.struct("timeout_ms" / Int32, "topics" / k.array(topic))


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    partition = k.struct(
        "partition_index" / Int32, "error_code" / Int16, "error_message" / k.string(nullable=True)
    )
    topic = k.struct("name" / k.string(), "partitions" / k.array(partition))
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "responses" / k.array(topic),
    )


SPEC = ApiSpec(
    key=ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    name="AlterPartitionReassignments",
    versions=(0,),
    flexible_versions=frozenset({0}),
    request=request,
    response=response,
)
