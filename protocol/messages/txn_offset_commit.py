"""TxnOffsetCommit (key 28) v0-v4: a transactional producer commits a group's offsets in its transaction.

The offsets stay pending in the group coordinator until the transaction's marker reaches the group's
``__consumer_offsets`` partition. v1 changes no field; v2 adds ``committed_leader_epoch``; v3 is
flexible and adds the member's ``generation_id``, ``member_id`` and ``group_instance_id`` (KIP-447);
v4 may answer TRANSACTION_ABORTABLE (KIP-890).

A body decoded at an older version lacks the newer fields; :func:`fill_defaults` puts in the values
Kafka reads for them (generation -1, member "", no instance id, leader epoch -1).
"""

from __future__ import annotations

from typing import Any

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int16, Int32, Int64, Layout, default, only

MEMBER_DEFAULTS: dict[str, Any] = {"generation_id": -1, "member_id": "", "group_instance_id": None}
"""The request's member fields (v3+) at Kafka's declared defaults: what older versions mean."""

NO_LEADER_EPOCH = -1
"""``committed_leader_epoch`` (v2+) when not known: what older versions mean."""


def request(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    partition = k.struct(
        "partition_index" / Int32,
        "committed_offset" / Int64,
        *only(version >= 2, default("committed_leader_epoch" / Int32, NO_LEADER_EPOCH)),
        "committed_metadata" / k.string(nullable=True),
    )
    return k.struct(
        "transactional_id" / k.string(),
        "group_id" / k.string(),
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        *only(
            version >= 3,
            default("generation_id" / Int32, MEMBER_DEFAULTS["generation_id"]),
            default("member_id" / k.string(), MEMBER_DEFAULTS["member_id"]),
            "group_instance_id" / k.string(nullable=True),
        ),
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= 3)
    partition = k.struct("partition_index" / Int32, "error_code" / Int16)
    return k.struct(
        "throttle_time_ms" / Int32,
        "topics" / k.array(k.struct("name" / k.string(), "partitions" / k.array(partition))),
    )


def fill_defaults(body: dict[str, Any]) -> dict[str, Any]:
    """``body``, a request decoded at any version, with the fields its version lacks set to Kafka's
    defaults (in place; returned for convenience), so a handler reads every version alike."""
    for name, value in MEMBER_DEFAULTS.items():
        body.setdefault(name, value)
    for topic in body["topics"]:
        for partition in topic["partitions"]:
            partition.setdefault("committed_leader_epoch", NO_LEADER_EPOCH)
    return body


SPEC = ApiSpec(
    key=ApiKey.TXN_OFFSET_COMMIT,
    name="TxnOffsetCommit",
    versions=tuple(range(0, 5)),
    flexible_versions=frozenset({3, 4}),
    request=request,
    response=response,
)
