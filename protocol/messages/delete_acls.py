"""DeleteAcls (key 31) v0-v3: remove the ACLs each filter matches, and list what each removed. v1 adds
the resource pattern type; v2+ is flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.messages.describe_acls import acl_filter
from protocol.types import Int8, Int16, Int32, Layout, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct("filters" / k.array(acl_filter(version)))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    matching = k.struct(
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "resource_type" / Int8,
        "resource_name" / k.string(),
        *only(version >= 1, "pattern_type" / Int8),
        "principal" / k.string(),
        "host" / k.string(),
        "operation" / Int8,
        "permission_type" / Int8,
    )
    result = k.struct(
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "matching_acls" / k.array(matching),
    )
    return k.struct("throttle_time_ms" / Int32, "filter_results" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.DELETE_ACLS,
    name="DeleteAcls",
    versions=(0, 1, 2, 3),
    flexible_versions=frozenset({2, 3}),
    request=request,
    response=response,
)
