"""CreateAcls (key 30) v0-v3: add ACL bindings, one result per binding, in order. v1 adds the resource
pattern type; v2+ is flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    creation = k.struct(
        "resource_type" / Int8,
        "resource_name" / k.string(),
        *only(version >= 1, "resource_pattern_type" / Int8),
        "principal" / k.string(),
        "host" / k.string(),
        "operation" / Int8,
        "permission_type" / Int8,
    )
    return k.struct("creations" / k.array(creation))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    result = k.struct("error_code" / Int16, "error_message" / k.string(nullable=True))
    return k.struct("throttle_time_ms" / Int32, "results" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.CREATE_ACLS,
    name="CreateAcls",
    versions=(0, 1, 2, 3),
    flexible_versions=frozenset({2, 3}),
    request=request,
    response=response,
)
