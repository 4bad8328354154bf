"""DescribeTransactions (key 65) v0: the state of transactional ids, from their coordinator (KIP-664).

Flexible in its only version. ``transaction_state`` is the coordinator's state name (``Empty``,
``Ongoing``, ``PrepareCommit``, ...); ``topics`` lists the partitions of an ongoing transaction (while
it completes, those still without a marker).
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    return k.struct("transactional_ids" / k.array(k.string()))


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    topic = k.struct("topic" / k.string(), "partitions" / k.array(Int32))
    state = k.struct(
        "error_code" / Int16,
        "transactional_id" / k.string(),
        "transaction_state" / k.string(),
        "transaction_timeout_ms" / Int32,
        "transaction_start_time_ms" / Int64,
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        "topics" / k.array(topic),
    )
    return k.struct("throttle_time_ms" / Int32, "transaction_states" / k.array(state))


SPEC = ApiSpec(
    key=ApiKey.DESCRIBE_TRANSACTIONS,
    name="DescribeTransactions",
    versions=(0,),
    flexible_versions=frozenset({0}),
    request=request,
    response=response,
)
