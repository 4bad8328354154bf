"""Produce (key 0) v3-v8: record batches for partitions, and the offsets they were appended at.

``records`` holds the producer's record batches exactly as sent (nullable bytes); the codec never looks
inside (``protocol.record_batch`` validates them). v3 is the first version with message format v2 and
``transactional_id``; v5 adds ``log_start_offset`` to the response; v8 adds per-record errors and an
error message (KIP-467). v9 and later are flexible and not implemented.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=False)
    partition = k.struct("index" / Int32, "records" / k.bytes(nullable=True))
    return k.struct(
        "transactional_id" / k.string(nullable=True),
        "acks" / Int16,
        "timeout_ms" / Int32,
        "topic_data" / k.array(k.struct("name" / k.string(), "partition_data" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=False)
    partition = k.struct(
        "index" / Int32,
        "error_code" / Int16,
        # Kafka answers a failed partition with INVALID_OFFSET and NO_TIMESTAMP (-1 both).
        default("base_offset" / Int64, -1),
        default("log_append_time_ms" / Int64, -1),
        *only(version >= 5, default("log_start_offset" / Int64, -1)),
        *only(
            version >= 8,
            "record_errors"
            / k.array(k.struct("batch_index" / Int32, "batch_index_error_message" / k.string(nullable=True))),
            "error_message" / k.string(nullable=True),
        ),
    )
    return k.struct(
        "responses" / k.array(k.struct("name" / k.string(), "partition_responses" / k.array(partition))),
        "throttle_time_ms" / Int32,
    )


SPEC = ApiSpec(
    key=ApiKey.PRODUCE,
    name="Produce",
    versions=tuple(range(3, 9)),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
