"""JoinGroup (key 11) v0-v7: a member asks to join a group's next generation.

v1 adds ``rebalance_timeout_ms``; v2 ``throttle_time_ms``; v4 changes no field but lets the
coordinator answer a new member MEMBER_ID_REQUIRED (KIP-394); v5 adds ``group_instance_id`` (static
members, KIP-345); v6 is the first flexible version; v7 adds ``protocol_type`` to the response and
makes ``protocol_name`` nullable.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 6)
    return k.struct(
        "group_id" / k.string(),
        "session_timeout_ms" / Int32,
        *only(version >= 1, "rebalance_timeout_ms" / Int32),
        "member_id" / k.string(),
        *only(version >= 5, "group_instance_id" / k.string(nullable=True)),
        "protocol_type" / k.string(),
        "protocols" / k.array(k.struct("name" / k.string(), "metadata" / k.bytes())),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 6)
    member = k.struct(
        "member_id" / k.string(),
        *only(version >= 5, "group_instance_id" / k.string(nullable=True)),
        "metadata" / k.bytes(),
    )
    return k.struct(
        *only(version >= 2, "throttle_time_ms" / Int32),
        "error_code" / Int16,
        default("generation_id" / Int32, -1),
        *only(version >= 7, "protocol_type" / k.string(nullable=True)),
        "protocol_name" / k.string(nullable=version >= 7),
        "leader" / k.string(),
        "member_id" / k.string(),
        "members" / k.array(member),
    )


SPEC = ApiSpec(
    key=ApiKey.JOIN_GROUP,
    name="JoinGroup",
    versions=tuple(range(0, 8)),
    flexible_versions=frozenset({6, 7}),
    request=request,
    response=response,
)
