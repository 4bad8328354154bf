"""DescribeGroups (key 15) v0-v5: groups' state, protocol and members with their assignments.

v1 adds ``throttle_time_ms``; v3 ``include_authorized_operations`` and ``authorized_operations``;
v4 members' ``group_instance_id``; v5 is flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Layout, default, only

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 5)
    return k.struct(
        "groups" / k.array(k.string()),
        *only(version >= 3, "include_authorized_operations" / Bool),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 5)
    member = k.struct(
        "member_id" / k.string(),
        *only(version >= 4, "group_instance_id" / k.string(nullable=True)),
        "client_id" / k.string(),
        "client_host" / k.string(),
        "member_metadata" / k.bytes(),
        "member_assignment" / k.bytes(),
    )
    group = k.struct(
        "error_code" / Int16,
        "group_id" / k.string(),
        "group_state" / k.string(),
        "protocol_type" / k.string(),
        "protocol_data" / k.string(),
        "members" / k.array(member),
        *only(version >= 3, default("authorized_operations" / Int32, AUTHORIZED_OPERATIONS_OMITTED)),
    )
    return k.struct(*only(version >= 1, "throttle_time_ms" / Int32), "groups" / k.array(group))


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_GROUPS,
    name="DescribeGroups",
    versions=tuple(range(0, 6)),
    flexible_versions=frozenset({5}),
    request=request,
    response=response,
)
