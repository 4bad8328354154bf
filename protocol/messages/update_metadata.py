"""UpdateMetadata (key 6): v5 as Apache Kafka defines it (KIP-380), v7 as seed 002 defines it.

The seed's v7 is v5's layout with ``max_broker_epoch`` in place of ``broker_epoch``; with it the
controller encodes one request per metadata change and writes the same bytes to every broker.
Endpoints put ``port`` before ``host``, as Kafka's do.
"""

from __future__ import annotations

from construct import Construct

from protocol.api import ApiKey, ApiSpec
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS, epoch_field
from protocol.types import Int16, Int32, Int64, KArray, KString, KStruct


def request(version: int) -> Construct:
    partition_state = KStruct(
        "partition_index" / Int32,
        "controller_epoch" / Int32,
        "leader" / Int32,
        "leader_epoch" / Int32,
        "isr" / KArray(Int32),
        "zk_version" / Int32,
        "replicas" / KArray(Int32),
        "offline_replicas" / KArray(Int32),
    )
    endpoint = KStruct(
        "port" / Int32,
        "host" / KString(),
        "listener" / KString(),
        "security_protocol" / Int16,
    )
    return KStruct(
        "controller_id" / Int32,
        "controller_epoch" / Int32,
        epoch_field(ApiKey.UPDATE_METADATA, version) / Int64,
        "topic_states"
        / KArray(KStruct("topic_name" / KString(), "partition_states" / KArray(partition_state))),
        "live_brokers"
        / KArray(KStruct("id" / Int32, "endpoints" / KArray(endpoint), "rack" / KString(nullable=True))),
    )


def response(version: int) -> Construct:
    return KStruct("error_code" / Int16)


SPEC = ApiSpec(
    key=ApiKey.UPDATE_METADATA,
    name="UpdateMetadata",
    versions=(
        PER_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA],
        MAX_BROKER_EPOCH_VERSIONS[ApiKey.UPDATE_METADATA],
    ),
    flexible_versions=frozenset(),
    request=request,
    response=response,
)
