"""OffsetCommit (key 8) v2-v8: a group's consumed positions, stored by its coordinator.

v2-v4 carry ``retention_time_ms`` (-1: the broker's retention); v3 adds ``throttle_time_ms`` to the
response; v5 drops the retention time; v6 adds ``committed_leader_epoch``; v7 ``group_instance_id``;
v8 is flexible. (v0 stored offsets in ZooKeeper and v1 carried a commit timestamp; neither is
offered: every current client speaks v2 or later.)
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 8)
    partition = k.struct(
        "partition_index" / Int32,
        "committed_offset" / Int64,
        *only(version >= 6, "committed_leader_epoch" / Int32),
        "committed_metadata" / k.string(nullable=True),
    )
    return k.struct(
        "group_id" / k.string(),
        "generation_id_or_member_epoch" / Int32,
        "member_id" / k.string(),
        *only(version >= 7, "group_instance_id" / k.string(nullable=True)),
        *only(version <= 4, "retention_time_ms" / Int64),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 8)
    partition = k.struct("partition_index" / Int32, "error_code" / Int16)
    return k.struct(
        *only(version >= 3, "throttle_time_ms" / Int32),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


SPEC = ApiSpec(
    key=ApiKey.OFFSET_COMMIT,
    name="OffsetCommit",
    versions=tuple(range(2, 9)),
    flexible_versions=frozenset({8}),
    request=request,
    response=response,
)
