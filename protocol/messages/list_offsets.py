"""ListOffsets (key 2) v1-v9: the offset for a timestamp, or the earliest (-2) or latest (-1) offset.

v1 answers one ``timestamp``/``offset`` pair per partition (v0's offset list is gone); v2 adds
``isolation_level`` and throttling; v4 the leader epochs of KIP-320. v6 is the first flexible version;
v7 to v9 only add timestamps the request may name (the largest timestamp, -3; the local and the tiered
log's bounds, -4 and -5) in the same layout. Apache Kafka 3.9's replica fetchers send v9 at IBP 3.9.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Int64, Layout, default, only

FIRST_FLEXIBLE_VERSION = 6
LATEST_VERSION = 9


def request(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition = k.struct(
        "partition_index" / Int32,
        *only(version >= 4, "current_leader_epoch" / Int32),
        "timestamp" / Int64,
    )
    return k.struct(
        "replica_id" / Int32,
        *only(version >= 2, "isolation_level" / Int8),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition = k.struct(
        "partition_index" / Int32,
        "error_code" / Int16,
        default("timestamp" / Int64, -1),
        default("offset" / Int64, -1),
        *only(version >= 4, default("leader_epoch" / Int32, -1)),
    )
    return k.struct(
        *only(version >= 2, "throttle_time_ms" / Int32),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


SPEC = ApiSpec(
    key=ApiKey.LIST_OFFSETS,
    name="ListOffsets",
    versions=tuple(range(1, LATEST_VERSION + 1)),
    flexible_versions=frozenset(range(FIRST_FLEXIBLE_VERSION, LATEST_VERSION + 1)),
    request=request,
    response=response,
)
