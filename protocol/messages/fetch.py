"""Fetch (key 1) v4-v17: consumers and followers read record batches from partition leaders.

v4 brings message format v2 with ``isolation_level``, the last stable offset and the aborted
transactions (a nullable array); v5 adds log start offsets; v7 fetch sessions (KIP-227) with a
top-level error code and ``forgotten_topics_data``; v9 ``current_leader_epoch`` (KIP-320); v11 the
consumer's ``rack_id`` and the ``preferred_read_replica`` answer (KIP-392). ``records`` is raw bytes;
a response may end in a partial batch, which clients discard.

v12 is the first flexible version: ``last_fetched_epoch`` per partition (truncation on fetch, KIP-595)
answered by the tagged ``diverging_epoch``, with the tagged ``current_leader`` and ``snapshot_id``, and
the request's tagged ``cluster_id``; v13 names topics by id (KIP-516); v14 is v13; v15 moves the
follower's id into the tagged ``replica_state`` with its broker epoch (KIP-903); v16 adds the
response's tagged ``node_endpoints``; v17 the partition's tagged ``replica_directory_id``. Apache
Kafka 3.9's replica fetchers send v17 at IBP 3.9, without asking which versions the leader speaks.
"""

from __future__ import annotations

import uuid

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.types import Int8, Int16, Int32, Int64, Layout, Uuid, default, only, tagged

FIRST_FLEXIBLE_VERSION = 12
FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15
FIRST_NODE_ENDPOINTS_VERSION = 16
FIRST_DIRECTORY_ID_VERSION = 17
LATEST_VERSION = 17

NO_REPLICA_STATE = {"replica_id": -1, "replica_epoch": -1}
"""``replica_state``'s default: a consumer's."""
NO_EPOCH_END_OFFSET = {"epoch": -1, "end_offset": -1}
"""``diverging_epoch``'s default: no divergence found."""
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}
NO_SNAPSHOT = {"end_offset": -1, "epoch": -1}
ZERO_UUID = uuid.UUID(int=0)


def _topic_key(k: Layout, version: int) -> Construct:
    return "topic_id" / Uuid if version >= FIRST_TOPIC_ID_VERSION else "topic" / k.string()


def request(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    partition = k.struct(
        "partition" / Int32,
        *only(version >= 9, "current_leader_epoch" / Int32),
        "fetch_offset" / Int64,
        *only(flexible, "last_fetched_epoch" / Int32),
        *only(version >= 5, "log_start_offset" / Int64),
        "partition_max_bytes" / Int32,
        *only(version >= FIRST_DIRECTORY_ID_VERSION, tagged(0, "replica_directory_id" / Uuid, ZERO_UUID)),
    )
    replica_state = k.struct("replica_id" / Int32, "replica_epoch" / Int64)
    return k.struct(
        *only(flexible, tagged(0, "cluster_id" / k.string(nullable=True), None)),
        *only(version < FIRST_REPLICA_STATE_VERSION, "replica_id" / Int32),
        *only(
            version >= FIRST_REPLICA_STATE_VERSION,
            tagged(1, "replica_state" / replica_state, NO_REPLICA_STATE),
        ),
        "max_wait_ms" / Int32,
        "min_bytes" / Int32,
        "max_bytes" / Int32,
        "isolation_level" / Int8,
        *only(version >= 7, "session_id" / Int32, "session_epoch" / Int32),
        "topics" / k.array(k.struct(_topic_key(k, version), "partitions" / k.array(partition))),
        *only(
            version >= 7,
            "forgotten_topics_data"
            / k.array(k.struct(_topic_key(k, version), "partitions" / k.array(Int32))),
        ),
        *only(version >= 11, "rack_id" / k.string()),
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    partition = k.struct(
        "partition_index" / Int32,
        "error_code" / Int16,
        # Kafka answers a failed partition with INVALID_HIGH_WATERMARK and the declared -1 defaults.
        default("high_watermark" / Int64, -1),
        default("last_stable_offset" / Int64, -1),
        *only(version >= 5, default("log_start_offset" / Int64, -1)),
        *only(
            flexible,
            tagged(
                0, "diverging_epoch" / k.struct("epoch" / Int32, "end_offset" / Int64), NO_EPOCH_END_OFFSET
            ),
            tagged(1, "current_leader" / k.struct("leader_id" / Int32, "leader_epoch" / Int32), NO_LEADER),
            tagged(2, "snapshot_id" / k.struct("end_offset" / Int64, "epoch" / Int32), NO_SNAPSHOT),
        ),
        "aborted_transactions"
        / k.array(k.struct("producer_id" / Int64, "first_offset" / Int64), nullable=True),
        *only(version >= 11, default("preferred_read_replica" / Int32, -1)),
        "records" / k.bytes(nullable=True),
    )
    node = k.struct("node_id" / Int32, "host" / k.string(), "port" / Int32, "rack" / k.string(nullable=True))
    return k.struct(
        "throttle_time_ms" / Int32,
        *only(version >= 7, "error_code" / Int16, "session_id" / Int32),
        "responses" / k.array(k.struct(_topic_key(k, version), "partitions" / k.array(partition))),
        *only(version >= FIRST_NODE_ENDPOINTS_VERSION, tagged(0, "node_endpoints" / k.array(node), [])),
    )


SPEC = ApiSpec(
    key=ApiKey.FETCH,
    name="Fetch",
    versions=tuple(range(4, LATEST_VERSION + 1)),
    flexible_versions=frozenset(range(FIRST_FLEXIBLE_VERSION, LATEST_VERSION + 1)),
    request=request,
    response=response,
)
