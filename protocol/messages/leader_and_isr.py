"""LeaderAndIsr (key 4): Apache Kafka's v2 (KIP-380) and v7 (Kafka 3.9), and seed 002's v5.

Kafka's layouts follow its JSON spec version by version: v3 adds the adding/removing replicas, v4 is
the first flexible version, v5 adds ``type`` and a ``topic_id`` per topic and answers by topic id,
v6 ``leader_recovery_state``, v7 ``is_kraft_controller``. The seed's v5 (SEED dialect only) is v2's
layout with ``broker_epoch`` replaced, in place, by ``max_broker_epoch``: the largest epoch among live
brokers, so one encoded request can serve every broker; see docs/protocol.md.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec, SeedLayouts
from protocol.messages import KAFKA_3_9_VERSIONS, MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS
from protocol.types import Bool, Int8, Int16, Int32, Int64, Layout, Uuid, only

FIRST_FLEXIBLE_VERSION = 4
FIRST_TOPIC_ID_VERSION = 5


def request(version: int, epoch_key: str = "broker_epoch") -> Construct:
    """Apache Kafka's layout of ``version`` (2 or later); the seed renames the epoch (``epoch_key``)."""
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition_state = k.struct(
        "partition_index" / Int32,
        "controller_epoch" / Int32,
        "leader" / Int32,
        "leader_epoch" / Int32,
        "isr" / k.array(Int32),
        "partition_epoch" / Int32,
        "replicas" / k.array(Int32),
        *only(version >= 3, "adding_replicas" / k.array(Int32), "removing_replicas" / k.array(Int32)),
        "is_new" / Bool,
        *only(version >= 6, "leader_recovery_state" / Int8),
    )
    topic_state = k.struct(
        "topic_name" / k.string(),
        *only(version >= FIRST_TOPIC_ID_VERSION, "topic_id" / Uuid),
        "partition_states" / k.array(partition_state),
    )
    return k.struct(
        "controller_id" / Int32,
        *only(version >= 7, "is_kraft_controller" / Bool),
        "controller_epoch" / Int32,
        epoch_key / Int64,
        *only(version >= FIRST_TOPIC_ID_VERSION, "type" / Int8),
        "topic_states" / k.array(topic_state),
        "live_leaders" / k.array(k.struct("broker_id" / Int32, "host_name" / k.string(), "port" / Int32)),
    )


def response(version: int) -> Construct:
    """Apache Kafka's layout of ``version``: per-partition errors by topic name up to v4, grouped by
    topic id from v5."""
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    if version < FIRST_TOPIC_ID_VERSION:
        error = k.struct("topic_name" / k.string(), "partition_index" / Int32, "error_code" / Int16)
        return k.struct("error_code" / Int16, "partition_errors" / k.array(error))
    error = k.struct("partition_index" / Int32, "error_code" / Int16)
    topic = k.struct("topic_id" / Uuid, "partition_errors" / k.array(error))
    return k.struct("error_code" / Int16, "topics" / k.array(topic))


def seed_request(version: int) -> Construct:
    """Seed 002's v5: v2's layout with ``max_broker_epoch`` in place of ``broker_epoch``."""
    return request(PER_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR], "max_broker_epoch")


def seed_response(version: int) -> Construct:
    """Seed 002's v5 answers in v2's layout."""
    return response(PER_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR])


SPEC = ApiSpec(
    key=ApiKey.LEADER_AND_ISR,
    name="LeaderAndIsr",
    versions=(PER_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR], KAFKA_3_9_VERSIONS[ApiKey.LEADER_AND_ISR]),
    flexible_versions=frozenset({KAFKA_3_9_VERSIONS[ApiKey.LEADER_AND_ISR]}),
    request=request,
    response=response,
    seed=SeedLayouts(
        versions=(MAX_BROKER_EPOCH_VERSIONS[ApiKey.LEADER_AND_ISR],),
        request=seed_request,
        response=seed_response,
    ),
)
