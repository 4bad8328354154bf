"""SyncGroup (key 14) v0-v5: members collect, and the leader hands out, a generation's assignments.

v1 adds ``throttle_time_ms``; v3 ``group_instance_id``; v4 is the first flexible version; v5 adds
``protocol_type`` and ``protocol_name`` to both sides (checked against the group's).
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct(
        "group_id" / k.string(),
        "generation_id" / Int32,
        "member_id" / k.string(),
        *only(version >= 3, "group_instance_id" / k.string(nullable=True)),
        *only(
            version >= 5, "protocol_type" / k.string(nullable=True), "protocol_name" / k.string(nullable=True)
        ),
        "assignments" / k.array(k.struct("member_id" / k.string(), "assignment" / k.bytes())),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct(
        *only(version >= 1, "throttle_time_ms" / Int32),
        "error_code" / Int16,
        *only(
            version >= 5, "protocol_type" / k.string(nullable=True), "protocol_name" / k.string(nullable=True)
        ),
        "assignment" / k.bytes(),
    )


SPEC = ApiSpec(
    key=ApiKey.SYNC_GROUP,
    name="SyncGroup",
    versions=tuple(range(0, 6)),
    flexible_versions=frozenset({4, 5}),
    request=request,
    response=response,
)
