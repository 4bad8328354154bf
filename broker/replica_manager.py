"""The partitions this broker hosts and the control requests that change them.

Kafka's ReplicaManager rules (reference §4.1): the controller epoch is checked and raised under one
state-change lock; a LeaderAndIsr partition is applied only with a higher leader epoch (a lower or
equal one is STALE_CONTROLLER_EPOCH for that partition) and only if this broker is a replica. Each
partition has its own lock, which the data plane takes too.

High watermarks are checkpointed only once a valid LeaderAndIsr of this broker generation has been
applied (KAFKA-7235): a request addressed to a previous generation is rejected before that, so it
can never make the broker overwrite its checkpoint with partitions it has not loaded yet.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from daemon.eventlog import EventLog
from protocol import ErrorCode
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.replica_manager")

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass(eq=False)
class Partition:
    """One hosted partition; every field is read and written under ``lock``."""

    tp: TopicPartition
    replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0
    controller_epoch: int = 0
    high_watermark: int = 0
    stopped: bool = False
    """StopReplica (without delete) arrived: no longer leading or fetching until the next LeaderAndIsr."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)


class ReplicaManager:
    def __init__(self, broker_id: int, log_dir: Path, events: EventLog) -> None:
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.events = events
        self.state_change_lock = threading.Lock()
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.hw_path = log_dir / HW_CHECKPOINT_FILE
        try:
            self._checkpointed = read_offsets(self.hw_path)
        except CorruptCheckpoint as exc:
            log.error("ignoring a corrupt high-watermark checkpoint: %s", exc)
            self._checkpointed = {}
        self.hw_checkpointing = False

    # -- generations

    def new_generation(self) -> None:
        """A new registration (broker epoch): wait for its first LeaderAndIsr before checkpointing again."""
        with self.state_change_lock:
            self.hw_checkpointing = False

    # -- controller epoch

    def accept_controller_epoch(self, epoch: int) -> bool:
        """Kafka's check for UpdateMetadata: reject an older controller epoch, else remember it."""
        with self.state_change_lock:
            if epoch < self.controller_epoch:
                return False
            self.controller_epoch = epoch
            return True

    # -- LeaderAndIsr

    def become_leader_or_follower(self, body: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        errors: list[dict[str, Any]] = []
        with self.state_change_lock:
            epoch = body["controller_epoch"]
            if epoch < self.controller_epoch:
                log.warning(
                    "LeaderAndIsr %d from controller %d epoch %d rejected: controller epoch %d is newer",
                    correlation_id,
                    body["controller_id"],
                    epoch,
                    self.controller_epoch,
                )
                for topic in body["topic_states"]:
                    for s in topic["partition_states"]:
                        errors.append(
                            _error(
                                topic["topic_name"], s["partition_index"], ErrorCode.STALE_CONTROLLER_EPOCH
                            )
                        )
                return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": errors}
            self.controller_epoch = epoch
            for topic in body["topic_states"]:
                name = topic["topic_name"]
                for s in topic["partition_states"]:
                    errors.append(
                        _error(
                            name,
                            s["partition_index"],
                            self._apply(TopicPartition(name, s["partition_index"]), s),
                        )
                    )
            if not self.hw_checkpointing:
                self.hw_checkpointing = True
                log.info(
                    "first LeaderAndIsr of this broker generation applied: high-watermark checkpoints start"
                )
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def _apply(self, tp: TopicPartition, state: dict[str, Any]) -> ErrorCode:
        partition = self.partitions.get(tp)
        current_epoch = partition.leader_epoch if partition is not None else NO_EPOCH
        replicas = tuple(state["replicas"])
        if state["leader_epoch"] <= current_epoch:
            log.info(
                "ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer than %d",
                tp.topic,
                tp.partition,
                state["leader_epoch"],
                current_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_id not in replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition is None:
            partition = Partition(tp, high_watermark=self._checkpointed.get(tp, 0))
            self.partitions[tp] = partition
        with partition.lock:
            was_leader = partition.leader == self.broker_id
            partition.replicas = replicas
            partition.leader = state["leader"]
            partition.leader_epoch = state["leader_epoch"]
            partition.isr = tuple(state["isr"])
            partition.partition_epoch = state["partition_epoch"]
            partition.controller_epoch = state["controller_epoch"]
            partition.stopped = False
            leader = partition.leader == self.broker_id
        self.events.emit(
            "become_leader" if leader else "become_follower",
            topic=tp.topic,
            partition=tp.partition,
            leader=state["leader"],
            leader_epoch=state["leader_epoch"],
            isr=state["isr"],
            partition_epoch=state["partition_epoch"],
            was_leader=was_leader,
        )
        return ErrorCode.NONE

    # -- StopReplica

    def stop_replicas(self, body: dict[str, Any]) -> dict[str, Any]:
        errors: list[dict[str, Any]] = []
        delete = body["delete_partitions"]
        with self.state_change_lock:
            if body["controller_epoch"] < self.controller_epoch:
                return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
            self.controller_epoch = body["controller_epoch"]
            for topic in body["topics"]:
                for index in topic["partition_indexes"]:
                    tp = TopicPartition(topic["name"], index)
                    # These versions carry no leader epoch (Kafka's NoEpoch): always accepted.
                    partition = self.partitions.pop(tp, None) if delete else self.partitions.get(tp)
                    if partition is not None and not delete:
                        with partition.lock:
                            partition.stopped = True
                    if delete:
                        self._checkpointed.pop(tp, None)
                    self.events.emit(
                        "stop_replica",
                        topic=tp.topic,
                        partition=tp.partition,
                        delete=delete,
                        hosted=partition is not None,
                        controller_epoch=body["controller_epoch"],
                    )
                    errors.append(_error(tp.topic, tp.partition, ErrorCode.NONE))
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    # -- high watermarks

    def checkpoint_high_watermarks(self) -> bool:
        """Write every hosted partition's high watermark; False (nothing written) before the first LAI."""
        with self.state_change_lock:
            if not self.hw_checkpointing:
                return False
            offsets = {}
            for tp, partition in self.partitions.items():
                with partition.lock:
                    offsets[tp] = partition.high_watermark
        write_offsets(self.hw_path, offsets)
        self.events.emit("checkpoint_written", file=HW_CHECKPOINT_FILE, partitions=len(offsets))
        return True

    # -- views

    def leader_count(self) -> int:
        return sum(1 for p in list(self.partitions.values()) if p.leader == self.broker_id and not p.stopped)

    def partition_count(self) -> int:
        return len(self.partitions)

    def under_replicated_count(self) -> int:
        return sum(
            1
            for p in list(self.partitions.values())
            if p.leader == self.broker_id and len(p.isr) < len(p.replicas)
        )


def _error(topic: str, partition: int, code: int) -> dict[str, Any]:
    return {"topic_name": topic, "partition_index": partition, "error_code": code}
