"""New topics and new partitions (TopicChange, PartitionModifications), as Kafka's onNewPartitionCreation.

A new partition goes NonExistent -> New -> Online: its state znode is created with the first live
replica as leader and every live replica in the ISR, and its replicas get LeaderAndIsr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from controller import events
from controller import state_machines as machines
from controller.model import Reassignment, TopicPartition
from controller.phantom_replicas import without_controller
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
        partitions = await self.add_topics(new, created=True)
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
        fixed = self._off_controller(topic, added)
        if fixed is not None:
            added = fixed
            written = replace(assignment, partitions={**known, **added}, topic_id=ctx.topic_ids.get(topic))
            await svc.store.commit([SetData(znodes.topic_path(topic), written.encode())])
        known.update(added)
        partitions = [TopicPartition(topic, p) for p in sorted(added)]
        svc.event_log.emit("partitions_added", topic=topic, partitions=sorted(added))
        await self._on_new_partition_creation(partitions)

    async def add_topics(self, topics: Iterable[str], *, created: bool = False) -> list[TopicPartition]:
        """Read new topics' assignments (watching them), give topic ids to those without; their partitions.

        ``created``: topics just created, whose partitions have no state yet; listed among the live
        brokers, the controller first hands the replicas a broker placed on it to brokers (as it does
        for partitions added to a topic).
        """
        ctx, svc = self.context, self.services
        assignments = await svc.store.assignments(sorted(topics), watch=svc.watches.topic)
        rewritten = []
        added = []
        for topic, read in assignments.items():
            fixed = self._off_controller(topic, dict(read.partitions)) if created else None
            assignment = read if fixed is None else replace(read, partitions=fixed)
            if assignment.topic_id is None:
                assignment = replace(assignment, topic_id=znodes.new_topic_id())
            if assignment is not read:
                rewritten.append(assignment)
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
        if rewritten:
            await svc.store.commit([SetData(znodes.topic_path(a.topic), a.encode()) for a in rewritten])
        return added

    def _off_controller(
        self, topic: str, partitions: dict[int, tuple[int, ...]]
    ) -> dict[int, tuple[int, ...]] | None:
        """New partitions' replicas with none on this controller, when it is listed as a live broker and
        some were placed on it (a broker spread them over the live brokers it knows); else None."""
        ctx, svc = self.context, self.services
        if not svc.config.listed_as_broker:
            return None
        fixed = without_controller(partitions, ctx.controller_id, ctx.live_broker_ids)
        if fixed is None:
            return None
        moved = sorted(p for p, r in partitions.items() if ctx.controller_id in r)
        log.warning(
            "%s: %d partitions name controller %d as a replica, which hosts none; handing them to brokers",
            topic,
            len(moved),
            ctx.controller_id,
        )
        svc.event_log.emit(
            "replicas_moved_off_controller",
            topic=topic,
            partitions=moved,
            replicas={str(p): list(fixed[p]) for p in moved},
        )
        return fixed

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
