"""UpdateMetadata (key 6): Apache Kafka's v5 (KIP-380) and v8 (Kafka 3.9), and seed 002's v7.

Kafka's layouts follow its JSON spec version by version: v6 is the first flexible version, v7 adds a
``topic_id`` per topic, v8 ``is_kraft_controller`` and ``type``, the first tagged field of any message
here (tag 0, default 0). Endpoints put ``port`` before ``host``, as Kafka's do. The seed's v7 (SEED
dialect only) is v5's layout with ``max_broker_epoch`` in place of ``broker_epoch``; with it the
controller encodes one request per metadata change and writes the same bytes to every broker.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec, SeedLayouts
from protocol.messages import KAFKA_3_9_VERSIONS, MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS
from protocol.types import Bool, Int8, Int16, Int32, Int64, Layout, Uuid, only, tagged

FIRST_FLEXIBLE_VERSION = 6
FIRST_TOPIC_ID_VERSION = 7
UNKNOWN_TYPE = 0
"""``type``'s default: neither a full snapshot (2) nor incremental (1), as outside a KRaft migration."""


def request(version: int, epoch_key: str = "broker_epoch") -> Construct:
    """Apache Kafka's layout of ``version`` (5 or later); the seed renames the epoch (``epoch_key``)."""
    k = Layout(flexible=version >= FIRST_FLEXIBLE_VERSION)
    partition_state = k.struct(
        "partition_index" / Int32,
        "controller_epoch" / Int32,
        "leader" / Int32,
        "leader_epoch" / Int32,
        "isr" / k.array(Int32),
        "zk_version" / Int32,
        "replicas" / k.array(Int32),
        "offline_replicas" / k.array(Int32),
    )
    topic_state = k.struct(
        "topic_name" / k.string(),
        *only(version >= FIRST_TOPIC_ID_VERSION, "topic_id" / Uuid),
        "partition_states" / k.array(partition_state),
    )
    endpoint = k.struct(
        "port" / Int32,
        "host" / k.string(),
        "listener" / k.string(),
        "security_protocol" / Int16,
    )
    broker = k.struct("id" / Int32, "endpoints" / k.array(endpoint), "rack" / k.string(nullable=True))
    return k.struct(
        "controller_id" / Int32,
        *only(version >= 8, "is_kraft_controller" / Bool, tagged(0, "type" / Int8, UNKNOWN_TYPE)),
        "controller_epoch" / Int32,
        epoch_key / Int64,
        "topic_states" / k.array(topic_state),
        "live_brokers" / k.array(broker),
    )


def response(version: int) -> Construct:
    return Layout(flexible=version >= FIRST_FLEXIBLE_VERSION).struct("error_code" / Int16)


def seed_request(version: int) -> Construct:
    """Seed 002's v7: v5's layout with ``max_broker_epoch`` in place of ``broker_epoch``."""
    return request(PER_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA], "max_broker_epoch")


def seed_response(version: int) -> Construct:
    """Seed 002's v7 answers in v5's layout."""
    return response(PER_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA])


SPEC = ApiSpec(
    key=ApiKey.UPDATE_METADATA,
    name="UpdateMetadata",
    versions=(PER_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA], KAFKA_3_9_VERSIONS[ApiKey.UPDATE_METADATA]),
    flexible_versions=frozenset({KAFKA_3_9_VERSIONS[ApiKey.UPDATE_METADATA]}),
    request=request,
    response=response,
    seed=SeedLayouts(
        versions=(MAX_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA],),
        request=seed_request,
        response=seed_response,
    ),
)
