"""InitProducerId (key 22) v0-v4: a producer id and epoch for an idempotent (or transactional) producer.

v2 is the first flexible version; v3 adds ``producer_id`` and ``producer_epoch`` to the request (a
producer asking to bump its epoch, KIP-360); v4 changes no field. ``transactional_id`` null means an
idempotent producer.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, default, only


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct(
        "transactional_id" / k.string(nullable=True),
        "transaction_timeout_ms" / Int32,
        *only(version >= 3, "producer_id" / Int64, "producer_epoch" / Int16),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 2)
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        default("producer_id" / Int64, -1),
        default("producer_epoch" / Int16, -1),
    )


SPEC = ApiSpec(
    key=ApiKey.INIT_PRODUCER_ID,
    name="InitProducerId",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({2, 3, 4}),
    request=request,
    response=response,
)
