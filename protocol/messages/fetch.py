"""Fetch (key 1) v4-v11: consumers and followers read record batches from partition leaders.

v4 brings message format v2 with ``isolation_level``, the last stable offset and the aborted
transactions (a nullable array); v5 adds log start offsets; v7 fetch sessions (KIP-227) with a
top-level error code and ``forgotten_topics_data``; v9 ``current_leader_epoch`` (KIP-320); v11 the
consumer's ``rack_id`` and the ``preferred_read_replica`` answer (KIP-392). ``records`` is raw bytes;
a response may end in a partial batch, which clients discard. v12 and later are flexible and not
implemented.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=False)
    partition = k.struct(
        "partition" / Int32,
        *only(version >= 9, "current_leader_epoch" / Int32),
        "fetch_offset" / Int64,
        *only(version >= 5, "log_start_offset" / Int64),
        "partition_max_bytes" / Int32,
    )
    return k.struct(
        "replica_id" / Int32,
        "max_wait_ms" / Int32,
        "min_bytes" / Int32,
        "max_bytes" / Int32,
        "isolation_level" / Int8,
        *only(version >= 7, "session_id" / Int32, "session_epoch" / Int32),
        "topics" / k.array(k.struct("topic" / k.string(), "partitions" / k.array(partition))),
        *only(
            version >= 7,
            "forgotten_topics_data" / k.array(k.struct("topic" / k.string(), "partitions" / k.array(Int32))),
        ),
        *only(version >= 11, "rack_id" / k.string()),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=False)
    partition = k.struct(
        "partition_index" / Int32,
        "error_code" / Int16,
        # Kafka answers a failed partition with INVALID_HIGH_WATERMARK and the declared -1 defaults.
        default("high_watermark" / Int64, -1),
        default("last_stable_offset" / Int64, -1),
        *only(version >= 5, default("log_start_offset" / Int64, -1)),
        "aborted_transactions"
        / k.array(k.struct("producer_id" / Int64, "first_offset" / Int64), nullable=True),
        *only(version >= 11, default("preferred_read_replica" / Int32, -1)),
        "records" / k.bytes(nullable=True),
    )
    return k.struct(
        "throttle_time_ms" / Int32,
        *only(version >= 7, "error_code" / Int16, "session_id" / Int32),
        "responses" / k.array(k.struct("topic" / k.string(), "partitions" / k.array(partition))),
    )


SPEC = ApiSpec(
    key=ApiKey.FETCH,
    name="Fetch",
    versions=tuple(range(4, 12)),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
