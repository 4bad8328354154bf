"""OffsetForLeaderEpoch (key 23) v0-v4: the end offset of a leader epoch, for log truncation (KIP-101).

A follower (or, from v3, a consumer validating its position, KIP-320) asks where an epoch ended. v1
answers the epoch actually found (``leader_epoch``); v2 adds ``current_leader_epoch`` fencing and
throttling; v3 names the requester (``replica_id``: a broker id, or -1 for a consumer); v4 is v3 made
flexible, what Apache Kafka's replica fetchers send from IBP 2.8.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, default, only

FIRST_FLEXIBLE_VERSION = 4


def request(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition = k.struct(
        "partition" / Int32,
        *only(version >= 2, "current_leader_epoch" / Int32),
        "leader_epoch" / Int32,
    )
    return k.struct(
        *only(version >= 3, "replica_id" / Int32),
        "topics" / k.array(k.struct("topic" / k.string(), "partitions" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition = k.struct(
        "error_code" / Int16,
        "partition" / Int32,
        # UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET when the epoch is unknown or the request failed.
        *only(version >= 1, default("leader_epoch" / Int32, -1)),
        default("end_offset" / Int64, -1),
    )
    return k.struct(
        *only(version >= 2, "throttle_time_ms" / Int32),
        "topics" / k.array(k.struct("topic" / k.string(), "partitions" / k.array(partition))),
    )


SPEC = ApiSpec(
    key=ApiKey.OFFSET_FOR_LEADER_EPOCH,
    name="OffsetForLeaderEpoch",
    versions=(0, 1, 2, 3, 4),
    flexible_versions=frozenset({FIRST_FLEXIBLE_VERSION}),
    request=request,
    response=response,
)
