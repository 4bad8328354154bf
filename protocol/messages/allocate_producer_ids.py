"""AllocateProducerIds (key 67) v0: a broker asks the controller for a block of producer ids.

Kafka's brokers at IBP 3.0-IV0 and later send it instead of claiming ``/latest_producer_id_block``
themselves; the controller checks the broker's epoch (KIP-380) and answers with the block it claimed.
Flexible in its only version.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    return k.struct("broker_id" / Int32, "broker_epoch" / Int64)


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "producer_id_start" / Int64,
        "producer_id_len" / Int32,
    )


SPEC = ApiSpec(
    key=ApiKey.ALLOCATE_PRODUCER_IDS,
    name="AllocateProducerIds",
    versions=(0,),
    flexible_versions=frozenset({0}),
    request=request,
    response=response,
)
