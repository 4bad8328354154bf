"""New topics and new partitions (TopicChange, PartitionModifications), as Kafka's onNewPartitionCreation.

A new partition goes NonExistent -> New -> Online: its state znode is created with the first live
replica as leader and every live replica in the ISR, and its replicas get LeaderAndIsr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller import events
from controller import state_machines as machines
from controller.model import Reassignment, TopicPartition
from controller.services import ControllerServices
from controller.state_tables import PartitionState, ReplicaState
from zkstore import znodes
from zkstore.ops import SetData

log = logging.getLogger("controller")


class TopicChanges:
    def __init__(self, services: ControllerServices) -> None:
        self.services = services
        self.context = services.context

    async def on_topic_change(self, _: events.TopicChange) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        topics = set(await svc.store.topics(watch=svc.watches.topics))
        for topic in set(ctx.assignments) - topics:
            ctx.forget_topic(topic)
        new = topics - set(ctx.assignments)
        if not new:
            return
        partitions = await self.add_topics(new)
        log.info("new topics %s with %d partitions", sorted(new), len(partitions))
        svc.event_log.emit("topics_created", topics=sorted(new), partitions=len(partitions))
        await self._on_new_partition_creation(partitions)

    async def on_partition_modifications(self, event: events.PartitionModifications) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active or event.topic not in ctx.assignments:
            return
        topic = event.topic
        assignment = (await svc.store.assignments([topic], watch=svc.watches.topic)).get(topic)
        if assignment is None:
            return
        known = ctx.assignments[topic]
        added = {p: r for p, r in assignment.partitions.items() if p not in known}
        if not added:
            return
        if ctx.is_topic_queued_for_deletion(topic):
            log.warning("partitions added to %s while it is being deleted; restoring its assignment", topic)
            restored = znodes.TopicAssignment(topic, dict(known), topic_id=ctx.topic_ids.get(topic))
            await svc.store.commit([SetData(znodes.topic_path(topic), restored.encode())])
            return
        known.update(added)
        partitions = [TopicPartition(topic, p) for p in sorted(added)]
        svc.event_log.emit("partitions_added", topic=topic, partitions=sorted(added))
        await self._on_new_partition_creation(partitions)

    async def add_topics(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Read new topics' assignments (watching them), give topic ids to those without; their partitions."""
        ctx, svc = self.context, self.services
        assignments = await svc.store.assignments(sorted(topics), watch=svc.watches.topic)
        missing_ids = []
        added = []
        for topic, assignment in assignments.items():
            if assignment.topic_id is None:
                assignment = znodes.TopicAssignment(
                    topic,
                    assignment.partitions,
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                    znodes.new_topic_id(),
                )
                missing_ids.append(assignment)
            ctx.assignments[topic] = dict(assignment.partitions)
            ctx.topic_ids[topic] = assignment.topic_id
            for p, full in assignment.partitions.items():
                adding = assignment.adding_replicas.get(p, ())
                removing = assignment.removing_replicas.get(p, ())
                if adding or removing:  # a reassignment in flight when the last controller stopped
                    origin = tuple(r for r in full if r not in adding)
                    target = tuple(r for r in full if r not in removing)
                    ctx.reassignments[TopicPartition(topic, p)] = Reassignment(origin, target)
            added += [TopicPartition(topic, p) for p in assignment.partitions]
        if missing_ids:
            await svc.store.commit([SetData(znodes.topic_path(a.topic), a.encode()) for a in missing_ids])
        return added

    async def rearm_watches(self) -> None:
        """After a reconnect: re-arm each topic's assignment watch; hand on partitions added meanwhile."""
        ctx, svc = self.context, self.services
        assignments = await svc.store.assignments(sorted(ctx.assignments), watch=svc.watches.topic)
        for topic, assignment in assignments.items():
            if set(assignment.partitions) - set(ctx.assignments.get(topic, {})):
                svc.enqueue(events.PartitionModifications(topic=topic))

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        ctx, svc = self.context, self.services
        replicas = [(tp, r) for tp in partitions for r in ctx.replicas(tp)]
        batch = svc.new_batch()
        await svc.apply(machines.partitions_to(ctx, batch, partitions, PartitionState.NEW))
        await svc.apply(machines.replicas_to(ctx, batch, replicas, ReplicaState.NEW))
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.partitions_to(ctx, batch, partitions, PartitionState.ONLINE))
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, replicas, ReplicaState.ONLINE))
        svc.send(batch)
