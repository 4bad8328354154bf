"""IncrementalAlterConfigs (key 44) v0-v1: change single config keys of a resource: SET (0),
DELETE (1), APPEND (2) and SUBTRACT (3), the last two on list-typed keys. v1 is flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.messages.alter_configs import resource_results
from protocol.types import Bool, Int8, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 1)
    config = k.struct("name" / k.string(), "config_operation" / Int8, "value" / k.string(nullable=True))
    resource = k.struct("resource_type" / Int8, "resource_name" / k.string(), "configs" / k.array(config))
    return k.struct("resources" / k.array(resource), "validate_only" / Bool)


def response(version: int) -> Construct:
    return resource_results(Layout(flexible=version >= 1))


SPEC = ApiSpec(
    key=ApiKey.INCREMENTAL_ALTER_CONFIGS,
    name="IncrementalAlterConfigs",
    versions=(0, 1),
    flexible_versions=frozenset({1}),
    request=request,
    response=response,
)
