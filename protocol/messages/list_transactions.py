"""ListTransactions (key 66) v0-v1: the transactional ids a coordinator holds, filtered (KIP-664).

Flexible in every version. Empty ``state_filters`` or ``producer_id_filters`` mean no filter; v1 adds
``duration_filter`` (KIP-994: only transactions running longer than that many milliseconds; below
zero, all). A v0 body lacks it; :func:`fill_defaults` puts in Kafka's default, -1. The response's
``unknown_state_filters`` echoes the filters the coordinator did not recognise.
"""

from __future__ import annotations

from typing import Any

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, default, only

NO_DURATION_FILTER = -1
"""``duration_filter`` meaning "every transaction": Kafka's default, and what v0 means."""


def request(version: int) -> Construct:
    k = Layout(flexible=True)
    return k.struct(
        "state_filters" / k.array(k.string()),
        "producer_id_filters" / k.array(Int64),
        *only(version >= 1, default("duration_filter" / Int64, NO_DURATION_FILTER)),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=True)
    state = k.struct("transactional_id" / k.string(), "producer_id" / Int64, "transaction_state" / k.string())
    return k.struct(
        "throttle_time_ms" / Int32,
        "error_code" / Int16,
        "unknown_state_filters" / k.array(k.string()),
        "transaction_states" / k.array(state),
    )


def fill_defaults(body: dict[str, Any]) -> dict[str, Any]:
    """``body``, a request decoded at any version, with ``duration_filter`` set to -1 where its version
    lacks it (in place; returned for convenience)."""
    body.setdefault("duration_filter", NO_DURATION_FILTER)
    return body


SPEC = ApiSpec(
    key=ApiKey.LIST_TRANSACTIONS,
    name="ListTransactions",
    versions=(0, 1),
    flexible_versions=frozenset({0, 1}),
    request=request,
    response=response,
)
