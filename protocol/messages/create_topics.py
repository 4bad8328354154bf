"""CreateTopics (key 19) v2-v7: create topics with a partition count and replication factor, or
explicit replica assignments, and topic configs.

(v0 and v1, without ``throttle_time_ms``, are not offered: current clients speak v2 or later.)
v1 adds ``validate_only`` and the results' ``error_message``; v2 ``throttle_time_ms``; v4 lets
``num_partitions`` / ``replication_factor`` be -1 (the broker's defaults); v5 is the first flexible
version and answers each topic's partitions, replication factor and configs; v7 adds the topic id.
(v5's tagged ``topic_config_error_code`` is never written, which reads as NONE.)
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int8, Int16, Int32, Layout, Uuid, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 5)
    assignment = k.struct("partition_index" / Int32, "broker_ids" / k.array(Int32))
    config = k.struct("name" / k.string(), "value" / k.string(nullable=True))
    topic = k.struct(
        "name" / k.string(),
        "num_partitions" / Int32,
        "replication_factor" / Int16,
        "assignments" / k.array(assignment),
        "configs" / k.array(config),
    )
    return k.struct(
        "topics" / k.array(topic),
        "timeout_ms" / Int32,
        *only(version >= 1, "validate_only" / Bool),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 5)
    config = k.struct(
        "name" / k.string(),
        "value" / k.string(nullable=True),
        "read_only" / Bool,
        default("config_source" / Int8, -1),
        "is_sensitive" / Bool,
    )
    topic = k.struct(
        "name" / k.string(),
        *only(version >= 7, "topic_id" / Uuid),
        "error_code" / Int16,
        *only(version >= 1, "error_message" / k.string(nullable=True)),
        *only(
            version >= 5,
            default("num_partitions" / Int32, -1),
            default("replication_factor" / Int16, -1),
            "configs" / k.array(config, nullable=True),
        ),
    )
    return k.struct(*only(version >= 2, "throttle_time_ms" / Int32), "topics" / k.array(topic))


SPEC = ApiSpec(
    key=ApiKey.CREATE_TOPICS,
    name="CreateTopics",
    versions=tuple(range(2, 8)),
    flexible_versions=frozenset({5, 6, 7}),
    request=request,
    response=response,
)
