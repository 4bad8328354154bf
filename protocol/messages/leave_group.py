"""LeaveGroup (key 13) v0-v4: members leave a group without waiting for their session to expire.

v1 adds ``throttle_time_ms``; v3 replaces the single ``member_id`` by a batch of ``members`` (with
static members' instance ids) answered one by one; v4 is flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct(
        "group_id" / k.string(),
        *only(version <= 2, "member_id" / k.string()),
        *only(
            version >= 3,
            "members"
            / k.array(k.struct("member_id" / k.string(), "group_instance_id" / k.string(nullable=True))),
        ),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    member = k.struct(
        "member_id" / k.string(), "group_instance_id" / k.string(nullable=True), "error_code" / Int16
    )
    return k.struct(
        *only(version >= 1, "throttle_time_ms" / Int32),
        "error_code" / Int16,
        *only(version >= 3, "members" / k.array(member)),
    )


SPEC = ApiSpec(
    key=ApiKey.LEAVE_GROUP,
    name="LeaveGroup",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({4}),
    request=request,
    response=response,
)
