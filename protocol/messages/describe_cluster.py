"""DescribeCluster (key 60) v0-v1: the cluster id, the brokers and the node that serves admin
requests (``controller_id``). Flexible in every version; v1 adds ``endpoint_type`` (1: brokers)."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int8, Int16, Int32, Layout, default, only

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    return k.struct(
        "include_cluster_authorized_operations" / Bool,
        *only(version >= 1, "endpoint_type" / Int8),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    broker = k.struct(
        "broker_id" / Int32, "host" / k.string(), "port" / Int32, "rack" / k.string(nullable=True)
    )
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "error_message" / k.string(nullable=True),
        *only(version >= 1, default("endpoint_type" / Int8, 1)),
        "cluster_id" / k.string(),
        default("controller_id" / Int32, -1),
        "brokers" / k.array(broker),
        default("cluster_authorized_operations" / Int32, AUTHORIZED_OPERATIONS_OMITTED),
    )


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_CLUSTER,
    name="DescribeCluster",
    versions=(0, 1),
    flexible_versions=frozenset({0, 1}),
    request=request,
    response=response,
)
