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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.alter_partition_manager import Outcome, Proposal
from broker.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from broker.log import LogConfig
from broker.log_manager import LogManager
from broker.metadata_cache import MetadataCache
from broker.partition import Partition, PartitionError
from broker.purgatory import Purgatory
from broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from daemon.eventlog import EventLog
from protocol import ErrorCode
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.replica_manager")

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_dir: Path,
        events: EventLog,
        *,
        log_manager: LogManager | None = None,
        metadata_cache: MetadataCache | None = None,
        fetcher_settings: FetcherSettings | None = None,
        checkpoint: Callable[[], None] = lambda: None,
        min_insync_replicas: int = 1,
        on_isr_change: Callable[[bool], None] | None = None,
        propose_isr: Callable[[Proposal], None] | None = None,
        on_elected: Callable[[TopicPartition, int], None] = lambda tp, leader_epoch: None,
        on_resigned: Callable[[TopicPartition, int | None], None] = lambda tp, leader_epoch: None,
        on_topic_deleted: Callable[[str], None] = lambda topic: None,
    ) -> None:
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.events = events
        self.log_manager = log_manager or LogManager(log_dir, LogConfig(), events)
        self.metadata_cache = metadata_cache
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")
        self.min_insync_replicas = min_insync_replicas
        """min.insync.replicas, the broker default."""
        self.topic_min_insync: dict[str, int] = {}
        """Topics overriding min.insync.replicas (replaced whole on change, read from any thread)."""
        self.on_isr_change = on_isr_change
        """Called with True for a committed expansion, False for a committed shrink (metrics)."""
        self.propose_isr = propose_isr
        """Sends an ISR proposal to the controller (the AlterPartition manager); None: no ISR changes."""
        self.on_elected = on_elected
        """Called (on the control-plane thread) when this broker starts leading a partition it did not
        lead, with the leader epoch: the group coordinator loads its groups then."""
        self.on_resigned = on_resigned
        """Called when this broker follows a partition in a new epoch or stops its replica (no epoch)."""
        self.on_topic_deleted = on_topic_deleted
        """Called for each topic a StopReplica(delete) removed partitions of: caches keyed by topic
        name (the topic id) must not outlive it, since a topic created again under that name is new."""
        self.fetchers = ReplicaFetcherManager(
            fetcher_settings or FetcherSettings.defaults(broker_id),
            self.partition_changed,
            events.emit,
            checkpoint,
        )
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
            leaders = {b["broker_id"]: (b["host_name"], b["port"]) for b in body["live_leaders"]}
            for topic in body["topic_states"]:
                name = topic["topic_name"]
                for s in topic["partition_states"]:
                    errors.append(
                        _error(
                            name,
                            s["partition_index"],
                            self._apply(TopicPartition(name, s["partition_index"]), s, leaders),
                        )
                    )
            if not self.hw_checkpointing:
                self.hw_checkpointing = True
                log.info("first LeaderAndIsr applied: high-watermark checkpoints start")
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def _apply(
        self, tp: TopicPartition, state: dict[str, Any], leaders: dict[int, tuple[str, int]]
    ) -> ErrorCode:
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
            partition = Partition(tp, self.broker_id, high_watermark=self._checkpointed.get(tp, 0))
            self.partitions[tp] = partition
        with partition.lock:
            was_leader = partition.leader == self.broker_id
            was_leading = partition.is_leader
            partition.replicas = replicas
            partition.leader = state["leader"]
            partition.leader_epoch = state["leader_epoch"]
            partition.isr = tuple(state["isr"])
            partition.partition_epoch = state["partition_epoch"]
            partition.controller_epoch = state["controller_epoch"]
            partition.stopped = False
            if partition.log is None:
                partition.log = self.log_manager.get_or_create(tp)
            leader = partition.leader == self.broker_id
            if leader:
                partition.become_leader(int(time.time() * 1000), was_leader=was_leader)
            else:
                partition.become_follower()
        if leader:
            self.fetchers.unfollow(tp)
        elif partition.leader in leaders:
            self.fetchers.follow(
                partition, partition.leader, leaders[partition.leader], partition.leader_epoch
            )
        else:  # Kafka's rule: no live leader in the request, nothing to fetch from
            self.fetchers.unfollow(tp)
            log.warning(
                "%s-%d: leader %d is not among the live leaders", tp.topic, tp.partition, partition.leader
            )
        self.partition_changed(tp)
        if leader and not was_leading:
            self.on_elected(tp, state["leader_epoch"])
        elif not leader:
            self.on_resigned(tp, state["leader_epoch"])
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
                    self.fetchers.unfollow(tp)
                    if partition is not None:
                        with partition.lock:
                            partition.stopped = True
                            partition.become_follower()
                            if delete:
                                partition.log = None
                    if delete:
                        self._checkpointed.pop(tp, None)
                        self.log_manager.delete(tp)
                    self.partition_changed(tp)
                    if partition is not None:
                        self.on_resigned(tp, None)
                    self.events.emit(
                        "stop_replica",
                        topic=tp.topic,
                        partition=tp.partition,
                        delete=delete,
                        hosted=partition is not None,
                        controller_epoch=body["controller_epoch"],
                    )
                    errors.append(_error(tp.topic, tp.partition, ErrorCode.NONE))
                if delete:
                    self.on_topic_deleted(topic["name"])
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    # -- the data plane

    def hosted(self, tp: TopicPartition) -> Partition:
        """The partition if hosted here; otherwise the error Kafka gives a client for it."""
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition
        if self.metadata_cache is not None and self.metadata_cache.snapshot.partition(tp) is not None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def partition_changed(self, tp: TopicPartition) -> None:
        """Data, high watermark or role changed: retry the requests waiting on this partition."""
        self.produce_purgatory.check(tp)
        self.fetch_purgatory.check(tp)

    # -- ISR changes (KIP-841: only live replicas are proposed; a refusal reverts to the committed ISR)

    def eligible(self, replica: int) -> bool:
        """A replica the leader may add to the ISR: alive in the metadata cache. (ZooKeeper-mode
        brokers are not told who is shutting down; the controller refuses those with 107.)"""
        return self.metadata_cache is not None and self.metadata_cache.has_alive_broker(replica)

    def maybe_expand_isr(self, partition: Partition, replica: int) -> None:
        """Under the partition's lock, after a follower fetch: propose adding it once it has caught up."""
        if (
            self.propose_isr is None
            or partition.pending_isr is not None
            or not partition.is_leader
            or not partition.may_join_isr(replica)
            or not self.eligible(replica)
        ):
            return
        self._propose(partition, tuple(sorted({*partition.isr, replica})), "expand")

    def shrink_isrs(self, max_lag_ms: int) -> int:
        """Propose dropping ISR followers that have not caught up within ``max_lag_ms``; returns how many."""
        if self.propose_isr is None:
            return 0
        now_ms = int(time.time() * 1000)
        proposed = 0
        for partition in list(self.partitions.values()):
            with partition.lock:
                if not partition.is_leader or partition.pending_isr is not None:
                    continue
                lagging = partition.out_of_sync(now_ms, max_lag_ms)
                if lagging:
                    self._propose(partition, tuple(r for r in partition.isr if r not in lagging), "shrink")
                    proposed += 1
        return proposed

    def _propose(self, partition: Partition, new_isr: tuple[int, ...], change: str) -> None:
        assert self.propose_isr is not None
        partition.pending_isr = new_isr
        tp = partition.tp
        self.events.emit(
            "isr_change_proposed",
            topic=tp.topic,
            partition=tp.partition,
            change=change,
            isr=list(partition.isr),
            new_isr=list(new_isr),
            leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch,
        )
        self.propose_isr(Proposal(tp, partition.leader_epoch, new_isr, partition.partition_epoch))

    def isr_outcome(self, outcome: Outcome) -> None:
        """The controller's answer to a proposal (on the event loop)."""
        proposal = outcome.proposal
        tp = proposal.tp
        partition = self.partitions.get(tp)
        if partition is None:
            return
        with partition.lock:
            if partition.pending_isr != proposal.new_isr or partition.leader_epoch != proposal.leader_epoch:
                return  # a newer leadership or proposal since: this answer no longer applies
            before = partition.isr
            if outcome.error == ErrorCode.NONE:
                committed = partition.isr_committed(
                    outcome.leader_epoch, outcome.isr, outcome.partition_epoch
                )
                if committed:
                    partition.maybe_advance_high_watermark()
            else:
                partition.pending_isr = None  # back to the last committed ISR; a later check may retry
                committed = False
            fields: dict[str, Any] = {
                "isr": list(partition.isr),
                "partition_epoch": partition.partition_epoch,
            }
        self.events.emit(
            "isr_changed" if committed else "isr_change_refused",
            topic=tp.topic,
            partition=tp.partition,
            error=ErrorCode.name_of(outcome.error),
            proposed=list(proposal.new_isr),
            previous_isr=list(before),
            **fields,
        )
        if committed:
            if self.on_isr_change is not None and set(fields["isr"]) != set(before):
                self.on_isr_change(len(fields["isr"]) > len(before))
            self.partition_changed(tp)

    def high_watermark(self, tp: TopicPartition) -> int | None:
        partition = self.partitions.get(tp)
        if partition is None:
            return None
        with partition.lock:
            return partition.high_watermark

    def shutdown(self) -> None:
        """Stop fetching, answer every waiting request, then flush and checkpoint the logs."""
        self.fetchers.shutdown()
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.log_manager.shutdown()

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

    def min_insync_for(self, topic: str) -> int:
        return self.topic_min_insync.get(topic, self.min_insync_replicas)

    def set_topic_min_insync(self, topic: str, value: int | None) -> None:
        changed = dict(self.topic_min_insync)
        if value is None:
            changed.pop(topic, None)
        else:
            changed[topic] = value
        self.topic_min_insync = changed

    def under_min_isr_count(self) -> int:
        return sum(
            1
            for p in list(self.partitions.values())
            if p.leader == self.broker_id and len(p.isr) < self.min_insync_for(p.tp.topic)
        )

    def under_replicated_count(self) -> int:
        return sum(
            1
            for p in list(self.partitions.values())
            if p.leader == self.broker_id and len(p.isr) < len(p.replicas)
        )


def _error(topic: str, partition: int, code: int) -> dict[str, Any]:
    return {"topic_name": topic, "partition_index": partition, "error_code": code}
