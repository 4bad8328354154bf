"""The partition and replica state machines: legal transitions (``state_tables``) and their effects.

Pure: a transition is a generator that updates the context, adds entries to the caller's request
batch, and *yields* the ZooKeeper work it needs as values (:class:`EnsureZnodes`,
:class:`WriteLeadership`). The shell's ``StateWriter`` performs each effect and sends the outcome
back in; tests can drive a transition by hand with no server. Leadership changes are planned by
``partition_changes``; the writer commits them with compare-and-set, re-reading and re-planning a
partition whose state znode moved, as Kafka's retry loop does. An illegal transition is logged and
skipped, never raised.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, cast

from controller import partition_changes as plans
from controller.context import ControllerContext
from controller.model import TopicPartition
from controller.partition_changes import ElectionStrategy, LeadershipChange, Refused
from controller.request_batch import RequestBatch
from controller.state_tables import (
    REPLICA_PREVIOUS,
    PartitionState,
    ReplicaState,
    partition_transition_allowed,
)
from zkstore import znodes

__all__ = [
    "Effect",
    "EnsureZnodes",
    "Replica",
    "Steps",
    "Unclean",
    "UncleanAllowed",
    "WriteLeadership",
    "Written",
    "initialize",
    "partitions_to",
    "replicas_to",
    "trigger_online_partition_state_change",
    "write_leadership",
]

log = logging.getLogger("state.change.logger")

Replica = tuple[TopicPartition, int]

Plan = Callable[[TopicPartition], LeadershipChange | Refused | None]


@dataclass(frozen=True, slots=True)
class EnsureZnodes:
    """Structural znodes that must exist (partition parents before their state znodes); may exist."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UncleanAllowed:
    """Which of ``topics`` allow an unclean election: each topic's ``unclean.leader.election.enable``
    in ``/config/topics/T``, else the controller's own setting. Yields back a set of topic names."""

    topics: tuple[str, ...]


class Unclean(enum.Enum):
    """Whether an offline partition with no live in-sync replica may take any live replica as leader."""

    NEVER = "never"
    BY_CONFIG = "by_config"
    """As the topic's ``unclean.leader.election.enable`` says (read only for such partitions, as
    Kafka does), else the controller's."""
    ALWAYS = "always"
    """An unclean election asked for through the Admin API (ElectLeaders UNCLEAN)."""


@dataclass(frozen=True, slots=True)
class WriteLeadership:
    """Commit ``plan(tp)`` for each partition, fenced and compare-and-set.

    A partition whose state znode version moved is re-read and planned again (``retry_stale``) or
    refused; refusals are reported under ``action`` when one is given.
    """

    partitions: tuple[TopicPartition, ...]
    plan: Plan
    action: str | None = None
    retry_stale: bool = True


@dataclass(frozen=True, slots=True)
class Written:
    """What a WriteLeadership did: the committed changes (already recorded in the context) and the rest."""

    done: list[LeadershipChange]
    refused: list[Refused]


Effect = EnsureZnodes | UncleanAllowed | WriteLeadership

T = TypeVar("T")
Steps = Generator[Effect, object, T]
"""A transition: yields effects, is sent each effect's outcome, returns its result."""


def write_leadership(
    partitions: Iterable[TopicPartition], plan: Plan, action: str | None = None, *, retry_stale: bool = True
) -> Steps[Written]:
    """Yield one WriteLeadership and return its outcome."""
    outcome = yield WriteLeadership(tuple(partitions), plan, action, retry_stale)
    if not isinstance(outcome, Written):
        raise TypeError(f"WriteLeadership was answered with {type(outcome).__name__}, not Written")
    return outcome


def ensure_znodes(paths: Sequence[str]) -> Steps[None]:
    yield EnsureZnodes(tuple(paths))


# -- initial states (failover)


def initialize(ctx: ControllerContext) -> tuple[dict[TopicPartition, list[int]], list[Replica]]:
    """Replica and partition states from the loaded context, as Kafka's ``startup`` sets them.

    Returns what the replica state machine's startup does next: the online replicas of each partition
    that has leadership, which moving to OnlineReplica (from OnlineReplica) only sends LeaderAndIsr, and
    the replicas that are not online. Written for a million partitions: one pass over the assignments,
    liveness looked up in a set, no per-replica transition to check.
    """
    online = ctx.live_broker_ids
    replica_states = ctx.replica_states
    partition_states = ctx.partition_states
    leadership = ctx.leadership
    replica_states.clear()
    partition_states.clear()
    up, down = ReplicaState.ONLINE, ReplicaState.DELETION_INELIGIBLE
    announce: dict[TopicPartition, list[int]] = {}
    offline: list[Replica] = []
    for topic, partitions in ctx.assignments.items():
        for partition, replicas in partitions.items():
            tp = TopicPartition(topic, partition)
            live = []
            for replica in replicas:
                if replica in online:
                    replica_states[tp, replica] = up
                    live.append(replica)
                else:
                    replica_states[tp, replica] = down
                    offline.append((tp, replica))
            info = leadership.get(tp)
            if info is None:
                partition_states[tp] = PartitionState.NEW
                continue
            partition_states[tp] = (
                PartitionState.ONLINE if info.leader_and_isr.leader in online else PartitionState.OFFLINE
            )
            if live:
                announce[tp] = live
    return announce, offline


def announce_online(batch: RequestBatch, announce: dict[TopicPartition, list[int]]) -> None:
    """LeaderAndIsr of each partition to its online replicas (``initialize``'s first result)."""
    for tp, brokers in announce.items():
        batch.add_leader_and_isr(brokers, tp)


# -- partition state machine


def _legal_partitions(
    ctx: ControllerContext, partitions: Iterable[TopicPartition], target: PartitionState
) -> list[TopicPartition]:
    legal = []
    for tp in partitions:
        current = ctx.partition_states.get(tp, PartitionState.NON_EXISTENT)
        if partition_transition_allowed(current, target):
            legal.append(tp)
        else:
            log.error(
                "illegal partition transition %s-%d %s -> %s",
                tp.topic,
                tp.partition,
                current.name,
                target.name,
            )
    return legal


def partitions_to(
    ctx: ControllerContext,
    batch: RequestBatch,
    partitions: Iterable[TopicPartition],
    target: PartitionState,
    strategy: ElectionStrategy = ElectionStrategy.OFFLINE,
    *,
    unclean: Unclean = Unclean.NEVER,
) -> Steps[list[Refused]]:
    """Move partitions to ``target``; returns those whose election or write failed."""
    legal = _legal_partitions(ctx, partitions, target)
    if target is not PartitionState.ONLINE:
        for tp in legal:
            if target is PartitionState.NON_EXISTENT:
                ctx.partition_states.pop(tp, None)
            else:
                ctx.partition_states[tp] = target
        return []
    new = [tp for tp in legal if ctx.partition_states.get(tp) is PartitionState.NEW]
    existing = [tp for tp in legal if ctx.partition_states.get(tp) is not PartitionState.NEW]
    failed: list[Refused] = []
    if new:
        yield from ensure_znodes(_partition_parents(new))
        written = yield from write_leadership(
            new, lambda tp: plans.initial_leadership(ctx, tp), "initial leader election"
        )
        for change in written.done:
            ctx.partition_states[change.tp] = PartitionState.ONLINE
            batch.add_leader_and_isr(change.new.isr, change.tp, is_new=True)
        failed += written.refused
    if existing:
        allowed = (
            (yield from _unclean_topics(ctx, existing, unclean))
            if strategy is ElectionStrategy.OFFLINE
            else ()
        )
        written = yield from write_leadership(
            existing,
            lambda tp: plans.election(ctx, tp, strategy, allow_unclean=tp.topic in allowed),
            f"{strategy.value} election",
        )
        for change in written.done:
            ctx.partition_states[change.tp] = PartitionState.ONLINE
            batch.add_leader_and_isr(change.recipients, change.tp)
        failed += written.refused
    return failed


def _unclean_topics(
    ctx: ControllerContext, partitions: Sequence[TopicPartition], unclean: Unclean
) -> Steps[Collection[str]]:
    """The topics of ``partitions`` that may take an unclean leader: only those with no live in-sync
    replica left are asked about."""
    stuck = {tp.topic for tp in partitions if not plans.clean_leader_available(ctx, tp)}
    if not stuck or unclean is Unclean.NEVER:
        return ()
    if unclean is Unclean.ALWAYS:
        return stuck
    allowed = yield UncleanAllowed(tuple(sorted(stuck)))
    return cast(Collection[str], allowed)


def _partition_parents(partitions: Sequence[TopicPartition]) -> list[str]:
    topics = sorted({tp.topic for tp in partitions})
    parents = [znodes.partitions_path(t) for t in topics]
    return parents + [znodes.partition_path(tp.topic, tp.partition) for tp in sorted(partitions)]


def trigger_online_partition_state_change(
    ctx: ControllerContext,
    batch: RequestBatch,
    *,
    unclean: Unclean = Unclean.BY_CONFIG,
    topics: Iterable[str] | None = None,
) -> Steps[list[Refused]]:
    """Elect leaders for New and Offline partitions, except those of topics being deleted."""
    wanted = None if topics is None else set(topics)
    candidates = [
        tp
        for tp, state in ctx.partition_states.items()
        if state in (PartitionState.NEW, PartitionState.OFFLINE)
        and not ctx.is_topic_queued_for_deletion(tp.topic)
        and (wanted is None or tp.topic in wanted)
    ]
    if not candidates:
        return []
    return (yield from partitions_to(ctx, batch, candidates, PartitionState.ONLINE, unclean=unclean))


# -- replica state machine


def _legal_replicas(
    ctx: ControllerContext, replicas: Iterable[Replica], target: ReplicaState
) -> list[Replica]:
    legal = []
    allowed = REPLICA_PREVIOUS[target]
    states = ctx.replica_states
    missing = ReplicaState.NON_EXISTENT
    for replica in replicas:
        current = states.get(replica, missing)
        if current in allowed:
            legal.append(replica)
        else:
            tp, broker = replica
            log.error(
                "illegal replica transition %s-%d on broker %d %s -> %s",
                tp.topic,
                tp.partition,
                broker,
                current.name,
                target.name,
            )
    return legal


def replicas_to(
    ctx: ControllerContext, batch: RequestBatch, replicas: Iterable[Replica], target: ReplicaState
) -> Steps[None]:
    legal = _legal_replicas(ctx, replicas, target)
    if target is ReplicaState.OFFLINE:
        yield from _replicas_offline(ctx, batch, legal)
        return
    if target is ReplicaState.ONLINE:
        _replicas_online(ctx, batch, legal)
        return
    for tp, broker in legal:
        if target is ReplicaState.NON_EXISTENT:
            _forget_replica(ctx, tp, broker)
            continue
        if target is ReplicaState.NEW:
            if not _announce_new_replica(ctx, batch, tp, broker):
                continue
        elif target is ReplicaState.DELETION_STARTED:
            batch.add_stop_replica([broker], tp, delete=True)
        ctx.replica_states[tp, broker] = target


def _announce_new_replica(
    ctx: ControllerContext, batch: RequestBatch, tp: TopicPartition, broker: int
) -> bool:
    """NewReplica: a LeaderAndIsr to it when the partition has a leader; False if it is that leader."""
    info = ctx.leadership.get(tp)
    if info is None:
        return True
    if info.leader_and_isr.leader == broker:
        log.error("replica %d of %s-%d is its leader: it cannot be new", broker, *tp)
        return False
    batch.add_leader_and_isr([broker], tp, is_new=True)
    return True


def _replicas_online(ctx: ControllerContext, batch: RequestBatch, replicas: Sequence[Replica]) -> None:
    """OnlineReplica: a new replica joins the assignment; an existing one gets its partition's state,
    in one LeaderAndIsr entry per partition for all its replicas (a failover moves every replica)."""
    states = ctx.replica_states
    leadership = ctx.leadership
    new, online = ReplicaState.NEW, ReplicaState.ONLINE
    announce: dict[TopicPartition, list[int]] = {}
    for replica in replicas:
        tp, broker = replica
        if states.get(replica) is new:
            replicas_now = ctx.replicas(tp)
            if broker not in replicas_now:
                ctx.assignments.setdefault(tp.topic, {})[tp.partition] = (*replicas_now, broker)
        elif tp in leadership:
            brokers = announce.get(tp)
            if brokers is None:
                announce[tp] = [broker]
            else:
                brokers.append(broker)
        states[replica] = online
    for tp, brokers in announce.items():
        batch.add_leader_and_isr(brokers, tp)


def _forget_replica(ctx: ControllerContext, tp: TopicPartition, broker: int) -> None:
    """NonExistentReplica: the replica leaves the assignment and the state table."""
    replicas_now = ctx.replicas(tp)
    if broker in replicas_now:
        ctx.assignments.setdefault(tp.topic, {})[tp.partition] = tuple(r for r in replicas_now if r != broker)
    ctx.replica_states.pop((tp, broker), None)


def _replicas_offline(
    ctx: ControllerContext, batch: RequestBatch, replicas: Sequence[Replica]
) -> Steps[None]:
    """StopReplica(delete=false), then each broker leaves those ISRs (one batched write per broker)."""
    by_broker: dict[int, list[TopicPartition]] = {}
    for tp, broker in replicas:
        batch.add_stop_replica([broker], tp, delete=False)
        by_broker.setdefault(broker, []).append(tp)
    for broker, partitions in sorted(by_broker.items()):
        written = yield from write_leadership(
            partitions,
            partial(plans.remove_from_isr, ctx, broker_id=broker),
            f"removing replica {broker} from the ISR",
        )
        for change in written.done:
            if not ctx.is_topic_queued_for_deletion(change.tp.topic):
                batch.add_leader_and_isr(change.recipients, change.tp)
        for tp in partitions:
            ctx.replica_states[tp, broker] = ReplicaState.OFFLINE
        without_leadership = [tp for tp in partitions if tp not in ctx.leadership]
        if without_leadership:
            batch.add_update_metadata(ctx.live_or_shutting_down_ids, without_leadership)
