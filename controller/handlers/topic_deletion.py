"""Topic deletion, as Kafka's TopicDeletionManager runs it.

A topic named under ``/admin/delete_topics`` is queued; once none of its replicas is offline and it
is not being reassigned, its partitions go Offline -> NonExistent (brokers drop them from their
metadata), its replicas get StopReplica(delete) and move to DeletionStarted, and each StopReplica
response moves a replica to DeletionSuccessful or DeletionIneligible. When every replica succeeded,
the topic's znodes are deleted. Failover, broker startups and finished reassignments call ``resume``.
"""

from __future__ import annotations

import logging

from controller import events
from controller import state_machines as machines
from controller.services import ControllerServices
from controller.state_machines import Replica
from controller.state_tables import PartitionState, ReplicaState
from zkstore import znodes
from zkstore.ops import Delete

log = logging.getLogger("controller")


class TopicDeletions:
    def __init__(self, services: ControllerServices) -> None:
        self.services = services
        self.context = services.context

    async def load(self) -> None:
        """Failover: queue the deletions in progress; topics with offline replicas cannot progress yet.

        With ``delete.topic.enable=false`` the requests are removed instead (Kafka's
        TopicDeletionManager.init), so a topic is never deleted by a controller that may not.
        """
        ctx, svc = self.context, self.services
        requested = await svc.store.children(znodes.DELETE_TOPICS, watch=svc.watches.delete_topics)
        if await self.drop_disabled_requests(requested):
            return
        for topic in requested:
            if topic in ctx.assignments:
                ctx.topics_to_delete.add(topic)
                if any(
                    not ctx.is_replica_online(r)
                    for tp in ctx.partitions_of([topic])
                    for r in ctx.replicas(tp)
                ):
                    ctx.topics_ineligible_for_deletion.add(topic)

    async def drop_disabled_requests(self, requested: list[str]) -> bool:
        """Failover with ``delete.topic.enable=false``: remove the deletion requests queued while no
        controller was active, instead of carrying them out; True when it did."""
        svc = self.services
        if not requested or svc.config.delete_topic_enable:
            return False
        log.info("delete.topic.enable is false: removing the deletion requests for %s", sorted(requested))
        svc.event_log.emit("topic_deletion_disabled", topics=sorted(requested))
        await svc.store.commit_ignoring_missing([Delete(znodes.delete_topic_path(t)) for t in requested])
        return True

    async def on_topic_deletion(self, _: events.TopicDeletion) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        requested = set(await svc.store.children(znodes.DELETE_TOPICS, watch=svc.watches.delete_topics))
        unknown = sorted(t for t in requested if t not in ctx.assignments)
        if unknown:
            log.info("deletion requested for unknown topics %s; removing the requests", unknown)
            await svc.store.commit_ignoring_missing([Delete(znodes.delete_topic_path(t)) for t in unknown])
        wanted = sorted(requested - set(unknown) - ctx.topics_to_delete)
        if not wanted:
            return
        if not svc.config.delete_topic_enable:
            log.info("delete.topic.enable is false: ignoring deletion of %s", wanted)
            svc.event_log.emit("topic_deletion_disabled", topics=wanted)
            await svc.store.commit_ignoring_missing([Delete(znodes.delete_topic_path(t)) for t in wanted])
            return
        ctx.topics_to_delete.update(wanted)
        svc.event_log.emit("topic_deletion_queued", topics=wanted)
        await self.resume()

    async def on_stop_replica_response(self, event: events.TopicDeletionStopReplicaResponse) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        batch = svc.new_batch()
        failed: list[Replica] = []
        succeeded: list[Replica] = []
        for tp, error in event.partition_errors.items():
            if not ctx.is_topic_queued_for_deletion(tp.topic):
                continue
            replica = (tp, event.broker_id)
            (failed if (error or event.error) else succeeded).append(replica)
        await svc.apply(machines.replicas_to(ctx, batch, failed, ReplicaState.DELETION_INELIGIBLE))
        await svc.apply(machines.replicas_to(ctx, batch, succeeded, ReplicaState.DELETION_SUCCESSFUL))
        ctx.topics_ineligible_for_deletion.update(tp.topic for tp, _ in failed)
        svc.send(batch)
        await self.resume()

    async def resume(self) -> None:
        """Move every queued deletion as far as it can go now."""
        ctx, svc = self.context, self.services
        for topic in sorted(ctx.topics_to_delete):
            replicas = [(tp, r) for tp in ctx.partitions_of([topic]) for r in ctx.replicas(tp)]
            states = [ctx.replica_states.get(r) for r in replicas]
            if all(s is ReplicaState.DELETION_SUCCESSFUL for s in states):
                await self._complete(topic, replicas)
                continue
            if any(s is ReplicaState.DELETION_STARTED for s in states):
                continue  # waiting for StopReplica responses
            if topic in ctx.topics_ineligible_for_deletion or any(
                tp.topic == topic for tp in ctx.reassignments
            ):
                continue
            ineligible = [
                r for r, s in zip(replicas, states, strict=True) if s is ReplicaState.DELETION_INELIGIBLE
            ]
            if ineligible:
                batch = svc.new_batch()
                await svc.apply(machines.replicas_to(ctx, batch, ineligible, ReplicaState.OFFLINE))
                svc.send(batch)
            await self._start(topic, replicas)

    async def _start(self, topic: str, replicas: list[Replica]) -> None:
        ctx, svc = self.context, self.services
        partitions = ctx.partitions_of([topic])
        if topic not in ctx.topics_with_deletion_started:
            ctx.topics_with_deletion_started.add(topic)
            batch = svc.new_batch()
            await svc.apply(machines.partitions_to(ctx, batch, partitions, PartitionState.OFFLINE))
            await svc.apply(machines.partitions_to(ctx, batch, partitions, PartitionState.NON_EXISTENT))
            # Leader -2 in UpdateMetadata: brokers drop the partitions from their metadata caches.
            batch.add_update_metadata(ctx.live_or_shutting_down_ids, partitions)
            svc.send(batch)
            svc.event_log.emit("topic_deletion_started", topic=topic, partitions=len(partitions))
        pending = [r for r in replicas if ctx.replica_states.get(r) is not ReplicaState.DELETION_SUCCESSFUL]
        dead = [r for r in pending if not ctx.is_replica_online(r[1])]
        live = [r for r in pending if ctx.is_replica_online(r[1])]
        batch = svc.new_batch()
        if dead:
            await svc.apply(machines.replicas_to(ctx, batch, dead, ReplicaState.OFFLINE))
            await svc.apply(machines.replicas_to(ctx, batch, dead, ReplicaState.DELETION_INELIGIBLE))
            ctx.topics_ineligible_for_deletion.add(topic)
        await svc.apply(machines.replicas_to(ctx, batch, live, ReplicaState.OFFLINE))
        await svc.apply(machines.replicas_to(ctx, batch, live, ReplicaState.DELETION_STARTED))
        svc.send(batch)

    async def _complete(self, topic: str, replicas: list[Replica]) -> None:
        ctx, svc = self.context, self.services
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, replicas, ReplicaState.NON_EXISTENT))
        partitions = sorted(ctx.partitions_of([topic]))
        ops = []
        for tp in partitions:
            ops.append(Delete(znodes.partition_state_path(tp.topic, tp.partition)))
            ops.append(Delete(znodes.partition_path(tp.topic, tp.partition)))
        ops += [
            Delete(znodes.partitions_path(topic)),
            Delete(znodes.topic_path(topic)),
            Delete(f"/config/topics/{topic}"),
            Delete(znodes.delete_topic_path(topic)),
        ]
        await svc.store.commit_ignoring_missing(ops)
        ctx.forget_topic(topic)
        log.info("topic %s deleted", topic)
        svc.event_log.emit("topic_deleted", topic=topic, partitions=len(partitions))
