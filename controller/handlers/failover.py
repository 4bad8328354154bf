"""What a newly elected controller does before anything else (Kafka's onControllerFailover).

Arm the admin watches first, so a request that lands while we load is seen afterwards; load brokers,
topics and leadership from ZooKeeper; tell every broker the live brokers; set the state machines'
initial states; elect leaders for partitions that have none; then resume what the last controller
left unfinished: reassignments, deletions and a requested preferred election.
"""

from __future__ import annotations

import asyncio
import logging

from controller import collector, events
from controller import state_machines as machines
from controller.handlers.isr_changes import IsrChanges
from controller.handlers.preferred_election import PreferredElections
from controller.handlers.reassignment import Reassignments
from controller.handlers.topic_deletion import TopicDeletions
from controller.handlers.topics import TopicChanges
from controller.services import ControllerServices
from controller.state_tables import ReplicaState
from zkstore import znodes

log = logging.getLogger("controller")


class Failover:
    def __init__(
        self,
        services: ControllerServices,
        topics: TopicChanges,
        deletions: TopicDeletions,
        reassignments: Reassignments,
        isr_changes: IsrChanges,
        preferred: PreferredElections,
    ) -> None:
        self.services = services
        self.context = services.context
        self.topics = topics
        self.deletions = deletions
        self.reassignments = reassignments
        self.isr_changes = isr_changes
        self.preferred = preferred

    async def run(self) -> None:
        """The failover, with the cyclic garbage collector held off while the context loads: loading a
        million partitions allocates millions of objects that all live on, and each full collection
        meanwhile would scan every one of them again (the failover grew faster than the partitions).
        What it built (context, state tables) lives as long as we lead, and is frozen afterwards."""
        with collector.held_off():
            await self._run()

    async def _run(self) -> None:
        ctx, svc = self.context, self.services
        await svc.store.ensure_paths(znodes.PERSISTENT_PATHS)
        # Watches first: a change that lands while we load is then seen as an event afterwards.
        await svc.store.data_if_exists(
            znodes.PREFERRED_REPLICA_ELECTION, watch=svc.watches.preferred_election
        )
        await svc.store.data_if_exists(znodes.REASSIGN_PARTITIONS, watch=svc.watches.reassignment)
        await self.isr_changes.discard_notifications()
        await self._load_context()
        await self.deletions.load()
        # Brokers learn the live brokers before any LeaderAndIsr.
        batch = svc.new_batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_ids)
        svc.send(batch)
        await asyncio.sleep(0)  # let the channel start writing while the next batch is built
        online, offline = machines.initialize(ctx)
        batch = svc.new_batch()
        machines.announce_online(batch, online)  # every online replica: OnlineReplica -> OnlineReplica
        svc.send(batch)
        await asyncio.sleep(0)
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, offline, ReplicaState.OFFLINE))
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.trigger_online_partition_state_change(ctx, batch))
        svc.send(batch)
        await self.reassignments.resume_all()
        await self.reassignments.on_zk_reassignment(events.ZkPartitionReassignment())
        await self.deletions.resume()
        await self.preferred.on_zk_preferred_election(events.ZkPreferredReplicaElection())
        self.preferred.start_auto_rebalance()

    async def _load_context(self) -> None:
        ctx, svc = self.context, self.services
        ctx.brokers = await svc.store.brokers(watch=svc.watches.brokers, data_watch=svc.watches.broker)
        # The view every failover decision is made with; broker_change lines carry it on from here.
        svc.event_log.emit(
            "brokers_loaded",
            controller_epoch=ctx.epoch,
            epochs={str(b): info.epoch for b, info in sorted(ctx.brokers.items())},
        )
        topics = await svc.store.topics(watch=svc.watches.topics)
        await self.topics.add_topics(topics)
        partitions = list(ctx.all_partitions())
        ctx.leadership = await svc.store.leadership(partitions)
        ctx.shutting_down.clear()
        for broker in ctx.brokers.values():
            svc.connect(broker)
        log.info(
            "controller %d loaded %d brokers, %d topics, %d partitions (%d with leadership)",
            ctx.controller_id,
            len(ctx.brokers),
            len(ctx.assignments),
            len(partitions),
            len(ctx.leadership),
        )
