"""Heartbeat (key 12) v0-v4: a member says it is alive and learns whether a rebalance started.

v1 adds ``throttle_time_ms``; v3 ``group_instance_id``; v4 is flexible.
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
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    return k.struct(*only(version >= 1, "throttle_time_ms" / Int32), "error_code" / Int16)


SPEC = ApiSpec(
    key=ApiKey.HEARTBEAT,
    name="Heartbeat",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({4}),
    request=request,
    response=response,
)
