"""ListGroups (key 16) v0-v4: the groups a coordinator holds.

v1 adds ``throttle_time_ms``; v3 is the first flexible version; v4 filters by state
(``states_filter``) and answers each group's ``group_state``.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    return k.struct(*only(version >= 4, "states_filter" / k.array(k.string())))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    group = k.struct(
        "group_id" / k.string(),
        "protocol_type" / k.string(),
        *only(version >= 4, "group_state" / k.string()),
    )
    return k.struct(
        *only(version >= 1, "throttle_time_ms" / Int32),
        "error_code" / Int16,
        "groups" / k.array(group),
    )


SPEC = ApiSpec(
    key=ApiKey.LIST_GROUPS,
    name="ListGroups",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({3, 4}),
    request=request,
    response=response,
)
