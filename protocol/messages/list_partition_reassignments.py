"""ListPartitionReassignments (key 46) v0, flexible (KIP-455): the reassignments in progress, for the
given partitions or (null) all of them."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    topic = k.struct("name" / k.string(), "partition_indexes" / k.array(Int32))
    return k.struct("timeout_ms" / Int32, "topics" / k.array(topic, nullable=True))


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    partition = k.struct(
        "partition_index" / Int32,
        "replicas" / k.array(Int32),
        "adding_replicas" / k.array(Int32),
        "removing_replicas" / k.array(Int32),
    )
    topic = k.struct("name" / k.string(), "partitions" / k.array(partition))
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "topics" / k.array(topic),
    )


SPEC = ApiSpec(
    key=ApiKey.LIST_PARTITION_REASSIGNMENTS,
    name="ListPartitionReassignments",
    versions=(0,),
    flexible_versions=frozenset({0}),
    request=request,
    response=response,
)
