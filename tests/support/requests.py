"""Request bodies tests send by hand.

The control requests default to a broker 1 being told about topic ``t`` by controller 100; the
epoch field is named for the version and dialect, so one builder serves both epoch modes and Apache
Kafka 3.9's versions (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4 in the KAFKA dialect), whose
topics carry ids (``topic_id_of`` unless given).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from protocol import DEFAULT_DIALECT, ApiKey, WireDialect, epoch_field
from zkstore import znodes

BROKER_ID = 1
CONTROLLER_ID = 100
LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
FIRST_LAI_TOPIC_ID_VERSION = 5
"""Kafka's LeaderAndIsr v5+ (not the seed's v5): topic ids, ``type``; v7 ``is_kraft_controller``."""
FIRST_UM_TOPIC_ID_VERSION = 7
FIRST_SR_TOPIC_STATES_VERSION = 3


def topic_id_of(topic: str) -> uuid.UUID:
    """A test topic's id: the same for the same name, never Kafka's zero id."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"topic:{topic}")


def _kafka_layout(version: int, first: int, dialect: WireDialect, seed_version: int) -> bool:
    """Whether ``version`` is one of Kafka's layouts from ``first`` (not the seed's same number)."""
    return version >= first and not (dialect is WireDialect.SEED and version == seed_version)


def alter_partition_request(
    broker_id: int,
    broker_epoch: int,
    topic: object,
    state: znodes.LeaderIsrState,
    partition_epoch: int,
    new_isr: list[int],
    version: int = 2,
) -> dict[str, Any]:
    """An AlterPartition body for partition 0 of ``topic`` (a topic id for v2+, a name before)."""
    partition: dict[str, Any] = {
        "partition_index": 0,
        "leader_epoch": state.leader_epoch,
        "new_isr": new_isr,
        "partition_epoch": partition_epoch,
    }
    if version >= 1:
        partition["leader_recovery_state"] = 0
    key = "topic_id" if version >= 2 else "topic_name"
    return {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "topics": [{key: topic, "partitions": [partition]}],
    }


def lai_partition(
    index: int,
    *,
    leader: int = BROKER_ID,
    leader_epoch: int = 1,
    replicas: Sequence[int] = (1, 2),
    isr: Sequence[int] | None = None,
    controller_epoch: int = 1,
    adding: Sequence[int] = (),
    removing: Sequence[int] = (),
    recovery: int = 0,
) -> dict[str, Any]:
    """A partition state; ``adding``, ``removing`` and ``recovery`` (KIP-704) are sent from v7 only."""
    return {
        "partition_index": index,
        "controller_epoch": controller_epoch,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": list(replicas if isr is None else isr),
        "partition_epoch": leader_epoch + 10,
        "replicas": list(replicas),
        "adding_replicas": list(adding),
        "removing_replicas": list(removing),
        "is_new": False,
        "leader_recovery_state": recovery,
    }


def leader_and_isr(
    version: int,
    broker_epoch: int,
    topics: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    *,
    controller_epoch: int = 1,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    kraft: bool = False,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> dict[str, Any]:
    """A LeaderAndIsr body; Kafka's v5+ layouts add ``type`` and each topic's id (``topic_ids``, else
    ``topic_id_of``), v7 ``is_kraft_controller`` (``kraft``)."""
    topics = {"t": [lai_partition(0, controller_epoch=controller_epoch)]} if topics is None else topics
    ids = topic_ids or {}
    by_id = _kafka_layout(version, FIRST_LAI_TOPIC_ID_VERSION, dialect, 5)
    body: dict[str, Any] = {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": controller_epoch,
        epoch_field(LAI, version, dialect): broker_epoch,
        "topic_states": [
            {
                "topic_name": t,
                **({"topic_id": ids.get(t, topic_id_of(t))} if by_id else {}),
                "partition_states": list(s),
            }
            for t, s in topics.items()
        ],
        "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 9092}],
    }
    if by_id:
        body["type"] = 0
    if version >= 7:
        body["is_kraft_controller"] = kraft
    return body


def um_partition(
    index: int,
    *,
    leader: int = BROKER_ID,
    leader_epoch: int = 1,
    replicas: Sequence[int] = (1, 2),
    controller_epoch: int = 1,
) -> dict[str, Any]:
    return {
        "partition_index": index,
        "controller_epoch": controller_epoch,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": list(replicas),
        "zk_version": leader_epoch + 10,
        "replicas": list(replicas),
        "offline_replicas": [],
    }


def live_broker(broker_id: int, rack: str | None = None) -> dict[str, Any]:
    return {
        "id": broker_id,
        "endpoints": [
            {"port": 9092, "host": f"broker-{broker_id}", "listener": "PLAINTEXT", "security_protocol": 0},
            {"port": 9093, "host": f"broker-{broker_id}", "listener": "CONTROLLER", "security_protocol": 0},
        ],
        "rack": rack,
    }


def update_metadata(
    version: int,
    broker_epoch: int,
    topics: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    *,
    controller_epoch: int = 1,
    controller_id: int = CONTROLLER_ID,
    live: Sequence[int] = (1, 2),
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    kraft: bool = False,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> dict[str, Any]:
    """An UpdateMetadata body; Kafka's v7+ layouts add each topic's id (``topic_ids``, else
    ``topic_id_of``), v8 ``is_kraft_controller`` (``kraft``) and the tagged ``type``."""
    topics = {"t": [um_partition(0, controller_epoch=controller_epoch)]} if topics is None else topics
    ids = topic_ids or {}
    by_id = _kafka_layout(version, FIRST_UM_TOPIC_ID_VERSION, dialect, 7)
    body: dict[str, Any] = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_field(UM, version, dialect): broker_epoch,
        "topic_states": [
            {
                "topic_name": t,
                **({"topic_id": ids.get(t, topic_id_of(t))} if by_id else {}),
                "partition_states": list(s),
            }
            for t, s in topics.items()
        ],
        "live_brokers": [live_broker(b) for b in live],
    }
    if version >= 8:
        body |= {"is_kraft_controller": kraft, "type": 0}
    return body


def stop_replica(
    version: int,
    broker_epoch: int,
    partitions: Mapping[str, Sequence[int]] | None = None,
    *,
    delete: bool = False,
    controller_epoch: int = 1,
    leader_epoch: int = -1,
    leader_epochs: Mapping[tuple[str, int], int] | None = None,
    kraft: bool = False,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> dict[str, Any]:
    """A StopReplica body. Kafka's v3+ layouts (v4 in the KAFKA dialect) give each partition its own
    ``delete_partition`` and leader epoch (``leader_epochs`` by (topic, partition), else
    ``leader_epoch``), v4 ``is_kraft_controller`` (``kraft``)."""
    partitions = {"t": [0]} if partitions is None else partitions
    body: dict[str, Any] = {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": controller_epoch,
        epoch_field(SR, version, dialect): broker_epoch,
    }
    if not _kafka_layout(version, FIRST_SR_TOPIC_STATES_VERSION, dialect, 4):
        body["delete_partitions"] = delete
        body["topics"] = [{"name": t, "partition_indexes": list(p)} for t, p in partitions.items()]
        return body
    epochs = leader_epochs or {}
    body["topic_states"] = [
        {
            "topic_name": t,
            "partition_states": [
                {
                    "partition_index": i,
                    "leader_epoch": epochs.get((t, i), leader_epoch),
                    "delete_partition": delete,
                }
                for i in p
            ],
        }
        for t, p in partitions.items()
    ]
    if version >= 4:
        body["is_kraft_controller"] = kraft
    return body
