"""WriteTxnMarkers (key 27) v0-v1: a transaction coordinator asks partition leaders to write markers.

Each marker names a producer, the outcome (``transaction_result``: false ABORT, true COMMIT), the
partitions to write it to and the coordinator's epoch for the ``__transaction_state`` partition;
the leader appends one control batch per partition (``protocol.control_records``). v1 is flexible.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Bool, Int16, Int32, Int64, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 1)
    topic = k.struct("name" / k.string(), "partition_indexes" / k.array(Int32))
    marker = k.struct(
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        "transaction_result" / Bool,
        "topics" / k.array(topic),
        "coordinator_epoch" / Int32,
    )
    return k.struct("markers" / k.array(marker))


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 1)
    partition = k.struct("partition_index" / Int32, "error_code" / Int16)
    topic = k.struct("name" / k.string(), "partitions" / k.array(partition))
    marker = k.struct("producer_id" / Int64, "topics" / k.array(topic))
    return k.struct("markers" / k.array(marker))


SPEC = ApiSpec(
    key=ApiKey.WRITE_TXN_MARKERS,
    name="WriteTxnMarkers",
    versions=(0, 1),
    flexible_versions=frozenset({1}),
    request=request,
    response=response,
)
