"""Partition reassignment, Kafka's algorithm (the comment above KafkaController.onPartitionReassignment).

With ORS the original replicas, TRS the target, RS = TRS + ORS the full set, AR = TRS - ORS the
replicas to add and RR = ORS - TRS those to remove:

* start: write RS, AR and RR to ``/brokers/topics/T``; bump the leader epoch and send LeaderAndIsr
  to RS; AR become new replicas and start fetching;
* when TRS is in the ISR: AR go online; RS = TRS in memory; move leadership to TRS if needed
  (or bump the epoch); RR go offline and are deleted; write RS = TRS (no AR/RR) to ZooKeeper; drop
  the partition from ``/admin/reassign_partitions``; UpdateMetadata to every broker.

Handles ZkPartitionReassignment (``/admin/reassign_partitions``); broker startups and ISR changes
call ``start`` and ``maybe_complete``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from controller import events
from controller import partition_changes as plans
from controller import state_machines as machines
from controller.handlers.topic_deletion import TopicDeletions
from controller.model import Reassignment, TopicPartition
from controller.partition_changes import ElectionStrategy
from controller.services import ControllerServices
from controller.state_tables import PartitionState, ReplicaState
from zkstore import znodes
from zkstore.ops import Delete, Op, SetData

log = logging.getLogger("controller.reassignment")


def invalid_target(target: tuple[int, ...]) -> str | None:
    """Why a requested replica list cannot be a target (Kafka's INVALID_REPLICA_ASSIGNMENT), or None."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"duplicate replicas in {list(target)}"
    if any(r < 0 for r in target):
        return f"negative broker id in {list(target)}"
    return None


class Reassignments:
    def __init__(self, services: ControllerServices, deletions: TopicDeletions) -> None:
        self.services = services
        self.context = services.context
        self.deletions = deletions

    # -- ZooKeeper

    async def _write_topic(self, topic: str) -> None:
        """``/brokers/topics/T`` from memory: RS per partition plus AR/RR of those being reassigned."""
        ctx = self.context
        partitions = ctx.assignments[topic]
        adding, removing = {}, {}
        for p in partitions:
            moving = ctx.reassignments.get(TopicPartition(topic, p))
            if moving is not None:
                if moving.adding:
                    adding[p] = moving.adding
                if moving.removing:
                    removing[p] = moving.removing
        payload = znodes.TopicAssignment(topic, dict(partitions), adding, removing, ctx.topic_ids.get(topic))
        await self.services.store.commit([SetData(znodes.topic_path(topic), payload.encode())])

    async def _remove_from_admin_znode(self, done: Iterable[TopicPartition]) -> None:
        """B7: drop finished partitions from ``/admin/reassign_partitions``; delete it once empty."""
        store = self.services.store
        found = await store.data_if_exists(znodes.REASSIGN_PARTITIONS)
        if found is None:
            return
        data, version = found
        pending = znodes.decode_reassignment(data, znodes.REASSIGN_PARTITIONS) or {}
        for tp in done:
            pending.pop(tp, None)
        op: Op
        if pending:
            op = SetData(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(pending), version)
        else:
            op = Delete(znodes.REASSIGN_PARTITIONS, version)
        result = (await store.commit([op]))[0]
        if isinstance(result, Exception):
            log.warning(
                "could not update %s: %r; it is re-read on the next change",
                znodes.REASSIGN_PARTITIONS,
                result,
            )

    # -- entry points

    async def on_zk_reassignment(self, _: events.ZkPartitionReassignment) -> None:
        svc = self.services
        if not svc.is_active:
            return
        found = await svc.store.data_if_exists(znodes.REASSIGN_PARTITIONS, watch=svc.watches.reassignment)
        if found is None:
            return
        requested = znodes.decode_reassignment(found[0], znodes.REASSIGN_PARTITIONS)
        if requested is None:  # corrupt: logged by the decoder; drop it so the next request can be made
            await svc.store.commit_ignoring_missing([Delete(znodes.REASSIGN_PARTITIONS, found[1])])
            return
        await self.on_zk_request(requested)

    async def on_zk_request(self, requested: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Validate a ``/admin/reassign_partitions`` request and start each valid move."""
        ctx = self.context
        finished: list[TopicPartition] = []
        for tp, target in sorted(requested.items()):
            reason = invalid_target(target)
            if reason is None and ctx.is_topic_queued_for_deletion(tp.topic):
                reason = "the topic is being deleted"
            if reason is None and not ctx.replicas(tp):
                reason = "unknown partition"
            if reason is not None:
                log.warning("reassignment of %s-%d refused: %s", tp.topic, tp.partition, reason)
                self.services.event_log.emit(
                    "reassignment_refused",
                    topic=tp.topic,
                    partition=tp.partition,
                    target=target,
                    reason=reason,
                )
                finished.append(tp)
                continue
            current = ctx.reassignments.get(tp)
            if current is not None and current.target == tuple(target):
                continue  # already moving there
            origin = current.origin if current is not None else ctx.replicas(tp)
            if current is None and tuple(target) == origin:
                finished.append(tp)  # already there
                continue
            await self.start(tp, Reassignment(origin, tuple(target)))
        if finished:
            await self._remove_from_admin_znode(finished)

    async def resume_all(self) -> None:
        """After failover: continue every reassignment recorded in the topic znodes."""
        for tp, moving in sorted(self.context.reassignments.items()):
            await self.start(tp, moving)

    async def start(self, tp: TopicPartition, moving: Reassignment) -> None:
        ctx, svc = self.context, self.services
        previous = ctx.reassignments.get(tp)
        old_full = ctx.replicas(tp)
        ctx.reassignments[tp] = moving
        ctx.assignments[tp.topic][tp.partition] = moving.replicas
        await self._write_topic(tp.topic)  # U1/U2
        svc.event_log.emit(
            "reassignment_started",
            topic=tp.topic,
            partition=tp.partition,
            origin=moving.origin,
            target=moving.target,
            replaced=previous.target if previous else None,
        )
        unneeded = [r for r in old_full if r not in moving.replicas]
        if unneeded:
            await self._stop_replicas(tp, unneeded)
        if self._complete(tp, moving):
            await self.finish(tp)
            return
        change = plans.bump_leader_epoch(ctx, tp, "reassignment started")  # A1
        if change is not None:
            batch = svc.new_batch()
            written = await svc.apply(machines.write_leadership([tp], lambda _tp: change))
            if written.done:
                batch.add_leader_and_isr([r for r in moving.origin if r in ctx.brokers], tp)
                batch.add_leader_and_isr([r for r in moving.adding if r in ctx.brokers], tp, is_new=True)
            svc.send(batch)
        batch = svc.new_batch()  # A2, for replicas not already started by an earlier attempt
        fresh = [(tp, r) for r in moving.adding if (tp, r) not in ctx.replica_states]
        await svc.apply(machines.replicas_to(ctx, batch, fresh, ReplicaState.NEW))
        svc.send(batch)

    def _complete(self, tp: TopicPartition, moving: Reassignment) -> bool:
        info = self.context.leadership.get(tp)
        return info is not None and all(r in info.leader_and_isr.isr for r in moving.target)

    async def maybe_complete(self, partitions: Iterable[TopicPartition]) -> None:
        """Finish the reassignments whose target replicas are now all in the ISR."""
        for tp in sorted(set(partitions)):
            moving = self.context.reassignments.get(tp)
            if moving is not None and self._complete(tp, moving):
                await self.finish(tp)

    async def finish(self, tp: TopicPartition) -> None:
        ctx, svc = self.context, self.services
        moving = ctx.reassignments[tp]
        batch = svc.new_batch()
        await svc.apply(
            machines.replicas_to(ctx, batch, [(tp, r) for r in moving.adding], ReplicaState.ONLINE)
        )
        svc.send(batch)  # B1
        ctx.assignments[tp.topic][tp.partition] = moving.target  # B2
        info = ctx.leadership.get(tp)
        leader = info.leader_and_isr.leader if info else -1
        batch = svc.new_batch()
        if leader not in moving.target or not ctx.is_replica_online(leader):  # B3
            await svc.apply(
                machines.partitions_to(ctx, batch, [tp], PartitionState.ONLINE, ElectionStrategy.REASSIGN)
            )
        else:
            change = plans.bump_leader_epoch(ctx, tp, "reassignment completed")
            if change is not None:
                written = await svc.apply(machines.write_leadership([tp], lambda _tp: change))
                if written.done:
                    batch.add_leader_and_isr(moving.target, tp)
        svc.send(batch)
        if moving.removing:
            await self._stop_replicas(tp, list(moving.removing))  # B4/B5
        del ctx.reassignments[tp]
        await self._write_topic(tp.topic)  # B6
        await self._remove_from_admin_znode([tp])  # B7
        batch = svc.new_batch()  # B8
        batch.add_update_metadata(ctx.live_or_shutting_down_ids, [tp])
        svc.send(batch)
        svc.event_log.emit(
            "reassignment_completed", topic=tp.topic, partition=tp.partition, replicas=moving.target
        )
        log.info("reassignment of %s-%d to %s completed", tp.topic, tp.partition, list(moving.target))
        await self.deletions.resume()

    async def _stop_replicas(self, tp: TopicPartition, replicas: list[int]) -> None:
        """Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent for replicas that leave."""
        ctx, svc = self.context, self.services
        pairs = [(tp, r) for r in replicas]
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, pairs, ReplicaState.OFFLINE))
        await svc.apply(machines.replicas_to(ctx, batch, pairs, ReplicaState.DELETION_STARTED))
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, pairs, ReplicaState.DELETION_SUCCESSFUL))
        await svc.apply(machines.replicas_to(ctx, batch, pairs, ReplicaState.NON_EXISTENT))
        svc.send(batch)
