"""Metadata (key 3) v1-v8: brokers, controller, and each topic's partitions with leader and replicas.

v1 makes ``topics`` nullable (null asks for every topic, an empty list for none) and adds racks, the
controller id and ``is_internal``; v2 adds ``cluster_id``; v3 ``throttle_time_ms``; v4
``allow_auto_topic_creation``; v5 ``offline_replicas``; v7 ``leader_epoch``; v8 the authorized
operations bitfields. v9 and later are flexible and not implemented.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Layout, default, only

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's value for an authorized-operations bitfield the client did not ask for."""


def request(version: int) -> Construct:
    k = Layout(flexible=False)
    return k.struct(
        "topics" / k.array(k.struct("name" / k.string()), nullable=True),
        *only(version >= 4, "allow_auto_topic_creation" / Bool),
        *only(version >= 8, "include_cluster_authorized_operations" / Bool),
        *only(version >= 8, "include_topic_authorized_operations" / Bool),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=False)
    broker = k.struct(
        "node_id" / Int32,
        "host" / k.string(),
        "port" / Int32,
        "rack" / k.string(nullable=True),
    )
    partition = k.struct(
        "error_code" / Int16,
        "partition_index" / Int32,
        "leader_id" / Int32,
        *only(version >= 7, default("leader_epoch" / Int32, -1)),
        "replica_nodes" / k.array(Int32),
        "isr_nodes" / k.array(Int32),
        *only(version >= 5, "offline_replicas" / k.array(Int32)),
    )
    topic = k.struct(
        "error_code" / Int16,
        "name" / k.string(),
        "is_internal" / Bool,
        "partitions" / k.array(partition),
        *only(version >= 8, default("topic_authorized_operations" / Int32, AUTHORIZED_OPERATIONS_OMITTED)),
    )
    return k.struct(
        *only(version >= 3, "throttle_time_ms" / Int32),
        "brokers" / k.array(broker),
        *only(version >= 2, "cluster_id" / k.string(nullable=True)),
        default("controller_id" / Int32, -1),
        "topics" / k.array(topic),
        *only(version >= 8, default("cluster_authorized_operations" / Int32, AUTHORIZED_OPERATIONS_OMITTED)),
    )


SPEC = ApiSpec(
    key=ApiKey.METADATA,
    name="Metadata",
    versions=tuple(range(1, 9)),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
