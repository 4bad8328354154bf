"""AddOffsetsToTxn (key 25) v0-v4: a transactional producer adds a group's offsets to its transaction.

The coordinator adds the group's ``__consumer_offsets`` partition to the transaction; the offsets
themselves follow in TxnOffsetCommit. v1 changes no field; v2 may answer PRODUCER_FENCED; v3 is
flexible; v4 may answer TRANSACTION_ABORTABLE (KIP-890).
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    return k.struct(
        "transactional_id" / k.string(),
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        "group_id" / k.string(),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    return k.struct("throttle_time_ms" / Int32, "error_code" / Int16)


SPEC = ApiSpec(
    key=ApiKey.ADD_OFFSETS_TO_TXN,
    name="AddOffsetsToTxn",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({3, 4}),
    request=request,
    response=response,
)
