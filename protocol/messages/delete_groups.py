"""DeleteGroups (key 42) v0-v2: remove Empty groups and their committed offsets. v2 is flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct("groups_names" / k.array(k.string()))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    result = k.struct("group_id" / k.string(), "error_code" / Int16)
    return k.struct("throttle_time_ms" / Int32, "results" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.DELETE_GROUPS,
    name="DeleteGroups",
    versions=(0, 1, 2),
    flexible_versions=frozenset({2}),
    request=request,
    response=response,
)
