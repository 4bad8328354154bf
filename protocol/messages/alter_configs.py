"""AlterConfigs (key 33) v0-v2: replace a resource's whole config with the request's entries (keys
left out are removed). v2 is flexible; v1 changes no field."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int8, Int16, Int32, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    config = k.struct("name" / k.string(), "value" / k.string(nullable=True))
    resource = k.struct("resource_type" / Int8, "resource_name" / k.string(), "configs" / k.array(config))
    return k.struct("resources" / k.array(resource), "validate_only" / Bool)


def resource_results(k: Layout) -> Construct:
    """The response both AlterConfigs and IncrementalAlterConfigs answer with: one result per resource."""
    result = k.struct(
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "resource_type" / Int8,
        "resource_name" / k.string(),
    )
    return k.struct("throttle_time_ms" / Int32, "responses" / k.array(result))


def response(version: int) -> Construct:
    return resource_results(Layout(flexible=version >= 2))


SPEC = ApiSpec(
    key=ApiKey.ALTER_CONFIGS,
    name="AlterConfigs",
    versions=(0, 1, 2),
    flexible_versions=frozenset({2}),
    request=request,
    response=response,
)
