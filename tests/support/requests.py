"""Request bodies tests send by hand.

The control requests default to a broker 1 being told about topic ``t`` by controller 100; the
epoch field is named for the version, so one builder serves both epoch modes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocol import ApiKey, epoch_field
from zkstore import znodes

BROKER_ID = 1
CONTROLLER_ID = 100
LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA


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
) -> dict[str, Any]:
    return {
        "partition_index": index,
        "controller_epoch": controller_epoch,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": list(replicas if isr is None else isr),
        "partition_epoch": leader_epoch + 10,
        "replicas": list(replicas),
        "is_new": False,
    }


def leader_and_isr(
    version: int,
    broker_epoch: int,
    topics: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    *,
    controller_epoch: int = 1,
) -> dict[str, Any]:
    topics = {"t": [lai_partition(0, controller_epoch=controller_epoch)]} if topics is None else topics
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": controller_epoch,
        epoch_field(LAI, version): broker_epoch,
        "topic_states": [{"topic_name": t, "partition_states": list(s)} for t, s in topics.items()],
        "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 9092}],
    }


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
) -> dict[str, Any]:
    topics = {"t": [um_partition(0, controller_epoch=controller_epoch)]} if topics is None else topics
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        epoch_field(UM, version): broker_epoch,
        "topic_states": [{"topic_name": t, "partition_states": list(s)} for t, s in topics.items()],
        "live_brokers": [live_broker(b) for b in live],
    }


def stop_replica(
    version: int,
    broker_epoch: int,
    partitions: Mapping[str, Sequence[int]] | None = None,
    *,
    delete: bool = False,
    controller_epoch: int = 1,
) -> dict[str, Any]:
    partitions = {"t": [0]} if partitions is None else partitions
    return {
        "controller_id": CONTROLLER_ID,
        "controller_epoch": controller_epoch,
        epoch_field(SR, version): broker_epoch,
        "delete_partitions": delete,
        "topics": [{"name": t, "partition_indexes": list(p)} for t, p in partitions.items()],
    }
