"""DescribeAcls (key 29) v0-v3: the ACLs matching a filter. v1 adds the resource pattern type; v2+ is
flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Layout, only


def acl_filter(version: int) -> Construct:
    """An ACL binding filter: DescribeAcls' request, and each of DeleteAcls' filters."""
    k = Layout(flexible=version >= 2)
    return k.struct(
        "resource_type_filter" / Int8,
        "resource_name_filter" / k.string(nullable=True),
        *only(version >= 1, "pattern_type_filter" / Int8),
        "principal_filter" / k.string(nullable=True),
        "host_filter" / k.string(nullable=True),
        "operation" / Int8,
        "permission_type" / Int8,
    )


def request(version: int) -> Construct:
    return acl_filter(version)


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    acl = k.struct(
        "principal" / k.string(),
        "host" / k.string(),
        "operation" / Int8,
        "permission_type" / Int8,
    )
    resource = k.struct(
        "resource_type" / Int8,
        "resource_name" / k.string(),
        *only(version >= 1, "pattern_type" / Int8),
        "acls" / k.array(acl),
    )
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "resources" / k.array(resource),
    )


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_ACLS,
    name="DescribeAcls",
    versions=(0, 1, 2, 3),
    flexible_versions=frozenset({2, 3}),
    request=request,
    response=response,
)
