"""The partition and replica state machines: legal transitions (``state_tables``) and their effects.

Leadership changes are planned by the pure functions of ``partition_changes``, committed to ZooKeeper
in fenced multi-ops (compare-and-set on each state znode; a stale version is re-read and re-planned,
as Kafka's retry loop does), recorded in the context, and announced through the request batch the
caller sends afterwards. An illegal transition is logged and skipped, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from kazoo.exceptions import BadVersionError

from controller import partition_changes as plans
from controller.context import ControllerContext
from controller.model import TopicPartition
from controller.partition_changes import ElectionStrategy, LeadershipChange, Refused
from controller.request_batch import RequestBatch
from controller.state_tables import (
    PartitionState,
    ReplicaState,
    partition_transition_allowed,
    replica_transition_allowed,
)
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from zkstore import znodes

log = logging.getLogger("state.change.logger")

MAX_WRITE_ATTEMPTS = 5
"""Compare-and-set rounds before a partition's change is given up (it keeps its state)."""

Replica = tuple[TopicPartition, int]


class StateMachines:
    def __init__(
        self,
        context: ControllerContext,
        store: ControllerStore,
        events: EventLog,
        on_unclean_election: Callable[[TopicPartition], None] = lambda tp: None,
    ) -> None:
        self.context = context
        self.store = store
        self.events = events
        self.on_unclean_election = on_unclean_election

    # -- initial states (failover)

    def initialize(self) -> None:
        """Replica and partition states from the loaded context, as Kafka's ``startup`` sets them."""
        ctx = self.context
        ctx.replica_states.clear()
        ctx.partition_states.clear()
        for tp in ctx.all_partitions():
            for replica in ctx.replicas(tp):
                online = ctx.is_replica_online(replica)
                ctx.replica_states[tp, replica] = (
                    ReplicaState.ONLINE if online else ReplicaState.DELETION_INELIGIBLE
                )
            info = ctx.leadership.get(tp)
            if info is None:
                ctx.partition_states[tp] = PartitionState.NEW
            elif ctx.is_replica_online(info.leader_and_isr.leader):
                ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                ctx.partition_states[tp] = PartitionState.OFFLINE

    # -- ZooKeeper writes

    async def write(
        self,
        partitions: Iterable[TopicPartition],
        plan: Callable[[TopicPartition], LeadershipChange | Refused | None],
        *,
        retry_stale: bool = True,
    ) -> tuple[list[LeadershipChange], list[Refused]]:
        """Plan, commit and record leadership changes; a stale znode version is re-read and re-planned.

        Without ``retry_stale`` (AlterPartition), a stale version refuses the change instead.
        """
        ctx = self.context
        done: list[LeadershipChange] = []
        refused: list[Refused] = []
        pending = list(partitions)
        for _attempt in range(MAX_WRITE_ATTEMPTS):
            changes = []
            for tp in pending:
                outcome = plan(tp)
                if isinstance(outcome, Refused):
                    refused.append(outcome)
                elif outcome is not None:
                    changes.append(outcome)
            if not changes:
                return done, refused
            results = await self.store.commit([c.op(ctx.epoch) for c in changes])
            stale = []
            for change, result in zip(changes, results, strict=True):
                if isinstance(result, BadVersionError):
                    stale.append(change.tp)
                elif isinstance(result, Exception):
                    refused.append(Refused(change.tp, f"ZooKeeper write failed: {type(result).__name__}"))
                else:
                    plans.committed(ctx, change, 0 if change.create else result.version)
                    done.append(change)
                    self._record(change)
            if not stale:
                return done, refused
            if not retry_stale:
                refused += [Refused(tp, "the state znode version changed") for tp in stale]
                return done, refused
            log.info("%d partition states changed under us; re-reading them", len(stale))
            ctx.leadership.update(await self.store.leadership(stale))
            pending = stale
        refused += [Refused(tp, "state znode kept changing; giving up") for tp in pending]
        return done, refused

    def _record(self, change: LeadershipChange) -> None:
        state = self.context.leadership[change.tp].leader_and_isr
        self.events.emit(
            "leader_and_isr_change",
            topic=change.tp.topic,
            partition=change.tp.partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            partition_epoch=state.partition_epoch,
            controller_epoch=self.context.epoch,
            reason=change.reason,
            unclean=change.unclean,
        )
        if change.unclean:
            log.warning(
                "unclean election for %s-%d: leader %d may have lost committed data",
                change.tp.topic,
                change.tp.partition,
                state.leader,
            )
            self.on_unclean_election(change.tp)

    def _refused(self, refused: Sequence[Refused], action: str) -> None:
        for r in refused:
            log.warning("%s of %s-%d failed: %s", action, r.tp.topic, r.tp.partition, r.reason)
            self.events.emit(
                "state_change_failed",
                topic=r.tp.topic,
                partition=r.tp.partition,
                action=action,
                reason=r.reason,
            )

    # -- partition state machine

    def _legal_partitions(
        self, partitions: Iterable[TopicPartition], target: PartitionState
    ) -> list[TopicPartition]:
        states = self.context.partition_states
        legal = []
        for tp in partitions:
            current = states.get(tp, PartitionState.NON_EXISTENT)
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

    async def partitions_to(
        self,
        batch: RequestBatch,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy = ElectionStrategy.OFFLINE,
        *,
        allow_unclean: bool = False,
    ) -> list[Refused]:
        """Move partitions to ``target``; returns those whose election or write failed."""
        ctx = self.context
        legal = self._legal_partitions(partitions, target)
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
            await self._create_partition_znodes(new)
            done, refused = await self.write(new, lambda tp: plans.initial_leadership(ctx, tp))
            for change in done:
                ctx.partition_states[change.tp] = PartitionState.ONLINE
                batch.add_leader_and_isr(change.new.isr, change.tp, is_new=True)
            self._refused(refused, "initial leader election")
            failed += refused
        if existing:
            done, refused = await self.write(
                existing, lambda tp: plans.election(ctx, tp, strategy, allow_unclean=allow_unclean)
            )
            for change in done:
                ctx.partition_states[change.tp] = PartitionState.ONLINE
                batch.add_leader_and_isr(change.recipients, change.tp)
            self._refused(refused, f"{strategy.value} election")
            failed += refused
        return failed

    async def _create_partition_znodes(self, partitions: Sequence[TopicPartition]) -> None:
        topics = sorted({tp.topic for tp in partitions})
        parents = [znodes.partitions_path(t) for t in topics]
        parents += [znodes.partition_path(tp.topic, tp.partition) for tp in sorted(partitions)]
        await self.store.create_parents(parents)

    async def trigger_online_partition_state_change(
        self, batch: RequestBatch, *, allow_unclean: bool, topics: Iterable[str] | None = None
    ) -> list[Refused]:
        """Elect leaders for New and Offline partitions, except those of topics being deleted."""
        ctx = self.context
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
        return await self.partitions_to(batch, candidates, PartitionState.ONLINE, allow_unclean=allow_unclean)

    # -- replica state machine

    def _legal_replicas(self, replicas: Iterable[Replica], target: ReplicaState) -> list[Replica]:
        states = self.context.replica_states
        legal = []
        for replica in replicas:
            current = states.get(replica, ReplicaState.NON_EXISTENT)
            if replica_transition_allowed(current, target):
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

    async def replicas_to(
        self, batch: RequestBatch, replicas: Iterable[Replica], target: ReplicaState
    ) -> None:
        ctx = self.context
        legal = self._legal_replicas(replicas, target)
        if target is ReplicaState.OFFLINE:
            await self._replicas_offline(batch, legal)
            return
        announce: dict[TopicPartition, list[int]] = {}
        """Online replicas to send LeaderAndIsr, grouped so each partition's state is built once."""
        for tp, broker in legal:
            current = ctx.replica_states.get((tp, broker), ReplicaState.NON_EXISTENT)
            if target is ReplicaState.NEW:
                info = ctx.leadership.get(tp)
                if info is not None:
                    if info.leader_and_isr.leader == broker:
                        log.error("replica %d of %s-%d is its leader: it cannot be new", broker, *tp)
                        continue
                    batch.add_leader_and_isr([broker], tp, is_new=True)
            elif target is ReplicaState.ONLINE:
                if current is ReplicaState.NEW:
                    replicas_now = ctx.replicas(tp)
                    if broker not in replicas_now:
                        ctx.assignments.setdefault(tp.topic, {})[tp.partition] = (*replicas_now, broker)
                elif tp in ctx.leadership:
                    announce.setdefault(tp, []).append(broker)
            elif target is ReplicaState.DELETION_STARTED:
                batch.add_stop_replica([broker], tp, delete=True)
            elif target is ReplicaState.NON_EXISTENT:
                replicas_now = ctx.replicas(tp)
                if broker in replicas_now:
                    ctx.assignments.setdefault(tp.topic, {})[tp.partition] = tuple(
                        r for r in replicas_now if r != broker
                    )
                ctx.replica_states.pop((tp, broker), None)
                continue
            ctx.replica_states[tp, broker] = target
        for tp, brokers in announce.items():
            batch.add_leader_and_isr(brokers, tp)

    async def _replicas_offline(self, batch: RequestBatch, replicas: Sequence[Replica]) -> None:
        """StopReplica(delete=false), then each broker leaves those ISRs (one batched write per broker)."""
        ctx = self.context
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, broker in replicas:
            batch.add_stop_replica([broker], tp, delete=False)
            by_broker.setdefault(broker, []).append(tp)
        for broker, partitions in sorted(by_broker.items()):
            done, refused = await self.write(
                partitions, lambda tp, b=broker: plans.remove_from_isr(ctx, tp, b)
            )
            self._refused(refused, f"removing replica {broker} from the ISR")
            for change in done:
                if not ctx.is_topic_queued_for_deletion(change.tp.topic):
                    batch.add_leader_and_isr(change.recipients, change.tp)
            for tp in partitions:
                ctx.replica_states[tp, broker] = ReplicaState.OFFLINE
            without_leadership = [tp for tp in partitions if tp not in ctx.leadership]
            if without_leadership:
                batch.add_update_metadata(ctx.live_or_shutting_down_ids, without_leadership)
