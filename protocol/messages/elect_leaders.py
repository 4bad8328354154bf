"""ElectLeaders (key 43) v0-v2: elect the preferred replica (or, v1+, any live replica when no in-sync
one is left: an unclean election) for the given partitions, or for every partition (null). v1 adds
the election type and a top-level error code; v2 is flexible."""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Layout, default, only

PREFERRED = 0
UNCLEAN = 1


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    topic = k.struct("topic" / k.string(), "partitions" / k.array(Int32))
    return k.struct(
        *only(version >= 1, default("election_type" / Int8, PREFERRED)),
        "topic_partitions" / k.array(topic, nullable=True),
        "timeout_ms" / Int32,
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    partition = k.struct(
        "partition_id" / Int32, "error_code" / Int16, "error_message" / k.string(nullable=True)
    )
    result = k.struct("topic" / k.string(), "partition_result" / k.array(partition))
    return k.struct(
        "throttle_time_ms" / Int32,
        *only(version >= 1, default("error_code" / Int16, 0)),
        "replica_election_results" / k.array(result),
    )


SPEC = ApiSpec(
    key=ApiKey.ELECT_LEADERS,
    name="ElectLeaders",
    versions=(0, 1, 2),
    flexible_versions=frozenset({2}),
    request=request,
    response=response,
)
