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
import uuid
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
from protocol.control_requests import NO_EPOCH, PartitionOrder, StopOrder
from zkstore.znodes import TopicPartition, format_topic_id

log = logging.getLogger("broker.replica_manager")

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
EPOCH_DURING_DELETE = -2
"""Kafka's LeaderAndIsr.EpochDuringDelete: a StopReplica's leader epoch while its topic is deleted."""
RECOVERED = 0
"""KIP-704's LeaderRecoveryState.RECOVERED."""


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

    def become_leader_or_follower(
        self, body: dict[str, Any], orders: list[PartitionOrder], correlation_id: int
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply a LeaderAndIsr (``orders``: its partitions, read by ``control_requests``); returns the
        top-level error and each partition's."""
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
                stale = ErrorCode.STALE_CONTROLLER_EPOCH
                return stale, {order.tp: stale for order in orders}
            self.controller_epoch = epoch
            leaders = {b["broker_id"]: (b["host_name"], b["port"]) for b in body["live_leaders"]}
            errors = {order.tp: self._apply(order, leaders) for order in orders}
            if not self.hw_checkpointing:
                self.hw_checkpointing = True
                log.info("first LeaderAndIsr applied: high-watermark checkpoints start")
        return ErrorCode.NONE, errors

    def _known_topic_id(self, tp: TopicPartition, partition: Partition | None) -> uuid.UUID | None:
        """What this broker knows of the partition's topic id: the partition's, else its log's file."""
        if partition is not None and partition.topic_id is not None:
            return partition.topic_id
        return self.log_manager.topic_id(tp)

    def _refusal(self, order: PartitionOrder, partition: Partition | None) -> ErrorCode | None:
        """Kafka's per-partition checks, in its order: the topic id, then the leader epoch (an equal one
        may still record a topic id the log lacked), then this broker among the replicas."""
        tp, state = order.tp, order.state
        known = self._known_topic_id(tp, partition)
        if order.topic_id is not None and known is not None and order.topic_id != known:
            log.error(
                "LeaderAndIsr for %s-%d names topic id %s; this broker's log has %s: refused",
                tp.topic, tp.partition, order.topic_id, known,
            )  # fmt: skip
            return ErrorCode.INCONSISTENT_TOPIC_ID
        current_epoch = partition.leader_epoch if partition is not None else NO_EPOCH
        if state["leader_epoch"] == current_epoch and partition is not None:
            if order.topic_id is not None and known is None:
                self._record_topic_id(partition, order.topic_id)
                return ErrorCode.NONE
            if order.topic_id is None and known is not None and state["leader"] != self.broker_id:
                return ErrorCode.NONE  # a request without ids at the same epoch: nothing to change
        if state["leader_epoch"] <= current_epoch:
            log.info(
                "ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer than %d",
                tp.topic, tp.partition, state["leader_epoch"], current_epoch,
            )  # fmt: skip
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_id not in state["replicas"]:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None

    def _record_topic_id(self, partition: Partition, topic_id: uuid.UUID) -> None:
        """The topic id from the controller, kept on the partition and in its log's ``partition.metadata``."""
        if partition.topic_id == topic_id:
            return
        partition.topic_id = topic_id
        self.log_manager.assign_topic_id(partition.tp, topic_id)
        log.info("%s-%d: topic id %s recorded", partition.tp.topic, partition.tp.partition, topic_id)

    def _apply(self, order: PartitionOrder, leaders: dict[int, tuple[str, int]]) -> ErrorCode:
        tp, state = order.tp, order.state
        partition = self.partitions.get(tp)
        refused = self._refusal(order, partition)
        if refused is not None:
            return refused
        if partition is None:
            partition = Partition(tp, self.broker_id, high_watermark=self._checkpointed.get(tp, 0))
            self.partitions[tp] = partition
        with partition.lock:
            was_leader = partition.leader == self.broker_id
            was_leading = partition.is_leader
            _take_state(partition, state)
            if partition.log is None:
                partition.log = self.log_manager.get_or_create(tp)
            if order.topic_id is not None:
                self._record_topic_id(partition, order.topic_id)
            elif partition.topic_id is None:
                partition.topic_id = self.log_manager.topic_id(tp)
            leader = partition.leader == self.broker_id
            if leader:
                partition.become_leader(int(time.time() * 1000), was_leader=was_leader)
            else:
                partition.become_follower()
        self._follow_or_lead(partition, leader, leaders)
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
            **_reassignment_fields(partition),
        )
        return ErrorCode.NONE

    def _follow_or_lead(
        self, partition: Partition, leader: bool, leaders: dict[int, tuple[str, int]]
    ) -> None:
        tp = partition.tp
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

    # -- StopReplica

    def stop_replicas(
        self, controller_epoch: int, orders: list[StopOrder]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply a StopReplica (``orders``, read by ``control_requests``); returns the top-level error
        and each partition's. Kafka's rule: a leader epoch below the partition's is FENCED_LEADER_EPOCH;
        -1 (none given) and -2 (the topic is being deleted) pass."""
        errors: dict[TopicPartition, ErrorCode] = {}
        deleted_topics: list[str] = []
        with self.state_change_lock:
            if controller_epoch < self.controller_epoch:
                return ErrorCode.STALE_CONTROLLER_EPOCH, errors
            self.controller_epoch = controller_epoch
            for order in orders:
                errors[order.tp] = error = self._stop(order, controller_epoch)
                if order.delete and error == ErrorCode.NONE and order.tp.topic not in deleted_topics:
                    deleted_topics.append(order.tp.topic)
            for topic in deleted_topics:
                self.on_topic_deleted(topic)
        return ErrorCode.NONE, errors

    def _stop(self, order: StopOrder, controller_epoch: int) -> ErrorCode:
        tp, delete = order.tp, order.delete
        hosted = self.partitions.get(tp)
        if (
            hosted is not None
            and order.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
            and order.leader_epoch < hosted.leader_epoch
        ):
            log.warning(
                "ignoring StopReplica (delete=%s) for %s-%d: leader epoch %d is below %d",
                delete, tp.topic, tp.partition, order.leader_epoch, hosted.leader_epoch,
            )  # fmt: skip
            return ErrorCode.FENCED_LEADER_EPOCH
        partition = self.partitions.pop(tp, None) if delete else hosted
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
            controller_epoch=controller_epoch,
            leader_epoch=order.leader_epoch,
        )
        return ErrorCode.NONE

    # -- the data plane

    def hosted(self, tp: TopicPartition) -> Partition:
        """The partition if hosted here; otherwise the error Kafka gives a client for it."""
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition
        if self.metadata_cache is not None and self.metadata_cache.snapshot.partition(tp) is not None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic of a hosted partition whose LeaderAndIsr (or log) gave it ``topic_id``: what a
        Fetch v13+ means when the metadata cache does not know the id yet (a scan, for that case only)."""
        for tp, partition in list(self.partitions.items()):
            if partition.topic_id == topic_id:
                return tp.topic
        return None

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
        self.propose_isr(
            Proposal(tp, partition.leader_epoch, new_isr, partition.partition_epoch, partition.topic_id)
        )

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
        """Led partitions with an ISR short of the replication factor; during a reassignment (Kafka's
        rule) that is the replicas less those being added."""
        return sum(
            1
            for p in list(self.partitions.values())
            if p.leader == self.broker_id and len(p.isr) < len(p.replicas) - len(p.adding_replicas)
        )


def _take_state(partition: Partition, state: dict[str, Any]) -> None:
    """A LeaderAndIsr partition state, under the partition's lock. A leader elected while recovering
    (KIP-704) has nothing to recover here and marks itself recovered, as Kafka's does."""
    partition.replicas = tuple(state["replicas"])
    partition.leader = state["leader"]
    partition.leader_epoch = state["leader_epoch"]
    partition.isr = tuple(state["isr"])
    partition.partition_epoch = state["partition_epoch"]
    partition.controller_epoch = state["controller_epoch"]
    partition.adding_replicas = tuple(state.get("adding_replicas", ()))
    partition.removing_replicas = tuple(state.get("removing_replicas", ()))
    recovery = state.get("leader_recovery_state", RECOVERED)
    if recovery != RECOVERED and partition.leader == partition.local_id:
        log.info(
            "%s-%d was marked as RECOVERING; marking it RECOVERED", partition.tp.topic, partition.tp.partition
        )
        recovery = RECOVERED
    partition.leader_recovery_state = recovery
    partition.stopped = False


def _reassignment_fields(partition: Partition) -> dict[str, Any]:
    """What a LeaderAndIsr v3+ adds to the role events, when it says something."""
    fields: dict[str, Any] = {}
    if partition.adding_replicas or partition.removing_replicas:
        fields["adding_replicas"] = list(partition.adding_replicas)
        fields["removing_replicas"] = list(partition.removing_replicas)
    if partition.topic_id is not None:
        fields["topic_id"] = format_topic_id(partition.topic_id)
    return fields
