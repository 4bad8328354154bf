"""StopReplica (key 5): Apache Kafka's v1 (KIP-380) and v4 (Kafka 3.9), and seed 002's v4.

Kafka's layouts follow its JSON spec version by version: v2 is the first flexible version, v3 replaces
``delete_partitions`` and ``topics`` with ``topic_states``, each partition carrying its leader epoch and
its own ``delete_partition``, v4 adds ``is_kraft_controller``. The seed's v4 (SEED dialect only) is
v1's layout with ``max_broker_epoch`` in place of ``broker_epoch``: the same number as Kafka's v4,
another message, which is why the codec needs to be told the dialect.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec, SeedLayouts
from protocol.messages import KAFKA_3_9_VERSIONS, MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS
from protocol.types import Bool, Int16, Int32, Int64, Layout, default, only

FIRST_FLEXIBLE_VERSION = 2
FIRST_TOPIC_STATES_VERSION = 3


def request(version: int, epoch_key: str = "broker_epoch") -> Construct:
    """Apache Kafka's layout of ``version`` (1 or later); the seed renames the epoch (``epoch_key``)."""
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    topics: tuple[Construct, ...]
    if version < FIRST_TOPIC_STATES_VERSION:
        topics = (
            "delete_partitions" / Bool,
            "topics" / k.array(k.struct("name" / k.string(), "partition_indexes" / k.array(Int32))),
        )
    else:
        partition_state = k.struct(
            "partition_index" / Int32,
            default("leader_epoch" / Int32, -1),
            "delete_partition" / Bool,
        )
        topic_state = k.struct("topic_name" / k.string(), "partition_states" / k.array(partition_state))
        topics = ("topic_states" / k.array(topic_state),)
    return k.struct(
        "controller_id" / Int32,
        *only(version >= 4, "is_kraft_controller" / Bool),
        "controller_epoch" / Int32,
        epoch_key / Int64,
        *topics,
    )


def response(version: int) -> Construct:
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    error = k.struct("topic_name" / k.string(), "partition_index" / Int32, "error_code" / Int16)
    return k.struct("error_code" / Int16, "partition_errors" / k.array(error))


def seed_request(version: int) -> Construct:
    """Seed 002's v4: v1's layout with ``max_broker_epoch`` in place of ``broker_epoch``."""
    return request(PER_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA], "max_broker_epoch")


def seed_response(version: int) -> Construct:
    """Seed 002's v4 answers in v1's layout."""
    return response(PER_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA])


SPEC = ApiSpec(
    key=ApiKey.STOP_REPLICA,
    name="StopReplica",
    versions=(PER_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA], KAFKA_3_9_VERSIONS[ApiKey.STOP_REPLICA]),
    flexible_versions=frozenset({KAFKA_3_9_VERSIONS[ApiKey.STOP_REPLICA]}),
    request=request,
    response=response,
    seed=SeedLayouts(
        versions=(MAX_BROKER_EPOCH_VERSIONS[ApiKey.STOP_REPLICA],),
        request=seed_request,
        response=seed_response,
    ),
)
