"""OffsetFetch (key 9) v1-v7: a group's committed positions.

v2 makes ``topics`` nullable (null: every partition with a committed offset) and adds a top-level
``error_code``; v3 ``throttle_time_ms``; v5 ``committed_leader_epoch``; v6 is flexible; v7 adds
``require_stable`` (KIP-447: UNSTABLE_OFFSET_COMMIT while a commit is in flight). (v8's several
groups per request are not offered.)
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 6)
    topic = k.struct("name" / k.string(), "partition_indexes" / k.array(Int32))
    return k.struct(
        "group_id" / k.string(),
        "topics" / k.array(topic, nullable=version >= 2),
        *only(version >= 7, "require_stable" / Bool),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 6)
    partition = k.struct(
        "partition_index" / Int32,
        default("committed_offset" / Int64, -1),
        *only(version >= 5, default("committed_leader_epoch" / Int32, -1)),
        "metadata" / k.string(nullable=True),
        "error_code" / Int16,
    )
    return k.struct(
        *only(version >= 3, "throttle_time_ms" / Int32),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
        *only(version >= 2, "error_code" / Int16),
    )


SPEC = ApiSpec(
    key=ApiKey.OFFSET_FETCH,
    name="OffsetFetch",
    versions=tuple(range(1, 8)),
    flexible_versions=frozenset({6, 7}),
    request=request,
    response=response,
)
