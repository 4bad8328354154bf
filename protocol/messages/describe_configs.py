"""DescribeConfigs (key 32) v1-v4: the configs of topics and brokers, with where each value comes from.

v1 has ``include_synonyms``, each config's ``config_source`` and its ``synonyms`` (v0, with an
``is_default`` flag instead, is not offered: current clients speak v1 or later); v3 adds
``include_documentation``, ``config_type`` and ``documentation``; v4 is flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int8, Int16, Int32, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    resource = k.struct(
        "resource_type" / Int8,
        "resource_name" / k.string(),
        "configuration_keys" / k.array(k.string(), nullable=True),
    )
    return k.struct(
        "resources" / k.array(resource),
        "include_synonyms" / Bool,
        *only(version >= 3, "include_documentation" / Bool),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 4)
    synonym = k.struct("name" / k.string(), "value" / k.string(nullable=True), "source" / Int8)
    config = k.struct(
        "name" / k.string(),
        "value" / k.string(nullable=True),
        "read_only" / Bool,
        default("config_source" / Int8, -1),
        "is_sensitive" / Bool,
        "synonyms" / k.array(synonym),
        *only(version >= 3, "config_type" / Int8, "documentation" / k.string(nullable=True)),
    )
    result = k.struct(
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        "resource_type" / Int8,
        "resource_name" / k.string(),
        "configs" / k.array(config),
    )
    return k.struct("throttle_time_ms" / Int32, "results" / k.array(result))


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_CONFIGS,
    name="DescribeConfigs",
    versions=tuple(range(1, 5)),
    flexible_versions=frozenset({4}),
    request=request,
    response=response,
)
