"""AddPartitionsToTxn (key 24) v0-v3: a transactional producer adds partitions to its transaction.

v1 changes no field; v2 may answer PRODUCER_FENCED; v3 is flexible. Kafka's JSON prefixes these
versions' fields with ``V3AndBelow``; the bodies here use the plain names (``transactional_id``,
``producer_id``, ``producer_epoch``, ``topics``; ``results_by_topic`` in the response). v4 and v5
(KIP-890) are broker-to-broker only (a partition leader verifying a transaction with its
coordinator, several transactions per request) and are not served: clients send v3 at most.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    topic = k.struct("name" / k.string(), "partitions" / k.array(Int32))
    return k.struct(
        "transactional_id" / k.string(),
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        "topics" / k.array(topic),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    partition = k.struct("partition_index" / Int32, "partition_error_code" / Int16)
    topic = k.struct("name" / k.string(), "results_by_partition" / k.array(partition))
    return k.struct("throttle_time_ms" / Int32, "results_by_topic" / k.array(topic))


SPEC = ApiSpec(
    key=ApiKey.ADD_PARTITIONS_TO_TXN,
    name="AddPartitionsToTxn",
    versions=tuple(range(0, 4)),
    flexible_versions=frozenset({3}),
    request=request,
    response=response,
)
