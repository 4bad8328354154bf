"""Broker registrations coming and going (BrokerChange, BrokerModifications): KIP-380 at work.

Every BrokerChange re-reads ``/brokers/ids`` with each registration's czxid (the broker epoch) and
classifies new, dead and bounced brokers (``broker_change``). A bounced broker, same id with a higher
epoch, is failed and then started again, as Kafka does, so its partitions are re-elected and it is
sent everything afresh with its new epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from controller import events
from controller import state_machines as machines
from controller.broker_change import BrokerChange, classify_broker_change
from controller.context import LiveBroker
from controller.handlers.reassignment import Reassignments
from controller.handlers.topic_deletion import TopicDeletions
from controller.services import ControllerServices
from controller.state_machines import Replica
from controller.state_tables import PartitionState, ReplicaState

log = logging.getLogger("controller")


class BrokerChanges:
    def __init__(
        self, services: ControllerServices, reassignments: Reassignments, deletions: TopicDeletions
    ) -> None:
        self.services = services
        self.context = services.context
        self.reassignments = reassignments
        self.deletions = deletions

    async def on_broker_change(self, _: events.BrokerChange) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        current = await svc.store.brokers(watch=svc.watches.brokers)
        cached = ctx.broker_epochs()
        change = classify_broker_change(cached, {b: info.epoch for b, info in current.items()})
        if change.empty:
            return
        self._log_change(change, cached, current)
        for b in change.new:
            ctx.brokers[b] = current[b]
            svc.connect(current[b])
        for b in (*change.bounced, *change.dead):
            svc.disconnect(b)
        if change.new:
            await self._on_broker_startup(change.new)
        if change.bounced:
            await self._on_brokers_bounced(change.bounced, current)
        if change.dead:
            await self._on_brokers_dead(change.dead)

    async def _on_brokers_bounced(self, bounced: tuple[int, ...], current: Mapping[int, LiveBroker]) -> None:
        """Failed with their old epoch, then started with the new one (and a fresh channel)."""
        ctx, svc = self.context, self.services
        for b in bounced:
            del ctx.brokers[b]
        await self._on_broker_failure(bounced)
        for b in bounced:
            ctx.brokers[b] = current[b]
            svc.connect(current[b])
        await self._on_broker_startup(bounced)

    async def _on_brokers_dead(self, dead: tuple[int, ...]) -> None:
        ctx, svc = self.context, self.services
        # As in Kafka, dead brokers leave the live set only now, after the new and bounced ones
        # were handled; this line marks the point for readers of the log (the KIP-841 audit).
        for b in dead:
            del ctx.brokers[b]
        svc.event_log.emit(
            "brokers_removed",
            controller_epoch=ctx.epoch,
            brokers=dead,
            epochs={str(b): info.epoch for b, info in sorted(ctx.brokers.items())},
        )
        await self._on_broker_failure(dead)

    def _log_change(
        self, change: BrokerChange, cached: Mapping[int, int], current: Mapping[int, LiveBroker]
    ) -> None:
        log.info(
            "broker change: new %s, dead %s, bounced %s",
            list(change.new),
            list(change.dead),
            [f"{b} epoch {cached[b]:#x} -> {current[b].epoch:#x}" for b in change.bounced],
        )
        self.services.event_log.emit(
            "broker_change",
            controller_epoch=self.context.epoch,
            new=change.new,
            dead=change.dead,
            bounced=change.bounced,
            epochs={str(b): e for b, e in change.epochs.items()},
            previous_epochs={str(b): cached[b] for b in (*change.dead, *change.bounced)},
        )

    async def on_broker_modifications(self, event: events.BrokerModifications) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        fresh = await svc.store.broker(event.broker_id, watch=svc.watches.broker)
        old = ctx.brokers.get(event.broker_id)
        if fresh is None or old is None or fresh.epoch != old.epoch:
            return  # a registration change, handled as a BrokerChange
        if fresh.registration.endpoints != old.registration.endpoints:
            log.info("broker %d changed its endpoints", event.broker_id)
            ctx.brokers[event.broker_id] = fresh
            batch = svc.new_batch()
            batch.add_update_metadata(ctx.live_or_shutting_down_ids)
            svc.send(batch)

    async def rearm_watches(self) -> None:
        """After a reconnect: re-arm each registration's data watch; endpoint changes made meanwhile
        (same epoch, other registration) are handed on as BrokerModifications."""
        ctx, svc = self.context, self.services
        for broker_id, fresh in (await svc.store.brokers(data_watch=svc.watches.broker)).items():
            old = ctx.brokers.get(broker_id)
            if old is not None and fresh.epoch == old.epoch and fresh.registration != old.registration:
                svc.enqueue(events.BrokerModifications(broker_id=broker_id))

    async def _on_broker_startup(self, new: Iterable[int]) -> None:
        ctx, svc = self.context, self.services
        new = sorted(new)
        existing = ctx.live_or_shutting_down_ids - set(new)
        batch = svc.new_batch()
        batch.add_update_metadata(existing)
        svc.send(batch)
        batch = svc.new_batch()
        batch.add_update_metadata(new, ctx.leadership.keys())
        svc.send(batch)
        replicas = [(tp, b) for tp in ctx.partitions_on_brokers(new) for b in ctx.replicas(tp) if b in new]
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, replicas, ReplicaState.ONLINE))
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.trigger_online_partition_state_change(ctx, batch))
        svc.send(batch)
        for tp, moving in sorted(ctx.reassignments.items()):
            if set(moving.target) & set(new):
                await self.reassignments.start(tp, moving)
        topics = {tp.topic for tp, _ in replicas} & ctx.topics_to_delete
        if topics:
            ctx.topics_ineligible_for_deletion -= topics
            await self.deletions.resume()
        for b in new:
            await svc.store.broker(b, watch=svc.watches.broker)

    async def _on_broker_failure(self, dead: Iterable[int]) -> None:
        ctx = self.context
        dead = sorted(dead)
        ctx.shutting_down.difference_update(dead)
        replicas = [(tp, b) for tp in ctx.partitions_on_brokers(dead) for b in ctx.replicas(tp) if b in dead]
        await self._on_replicas_become_offline(replicas)

    async def _on_replicas_become_offline(self, replicas: list[Replica]) -> None:
        ctx, svc = self.context, self.services
        deleting = [r for r in replicas if ctx.is_topic_queued_for_deletion(r[0].topic)]
        normal = [r for r in replicas if not ctx.is_topic_queued_for_deletion(r[0].topic)]
        leaderless = [
            tp
            for tp, info in ctx.leadership.items()
            if not ctx.is_replica_online(info.leader_and_isr.leader)
            and not ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        batch = svc.new_batch()
        await svc.apply(machines.partitions_to(ctx, batch, leaderless, PartitionState.OFFLINE))
        await svc.apply(machines.trigger_online_partition_state_change(ctx, batch))
        elections_announced = batch.update_metadata_everyone
        svc.send(batch)
        batch = svc.new_batch()
        await svc.apply(machines.replicas_to(ctx, batch, normal, ReplicaState.OFFLINE))
        svc.send(batch)
        if deleting:
            batch = svc.new_batch()
            await svc.apply(machines.replicas_to(ctx, batch, deleting, ReplicaState.DELETION_INELIGIBLE))
            svc.send(batch)
            ctx.topics_ineligible_for_deletion.update(tp.topic for tp, _ in deleting)
        if not elections_announced:
            self.announce_departures()

    def announce_departures(self) -> None:
        """No election, or none succeeded: tell the brokers who is gone all the same (Kafka sends it
        when nothing was leaderless; a failed election must not silence it either)."""
        batch = self.services.new_batch()
        batch.add_update_metadata(self.context.live_or_shutting_down_ids)
        self.services.send(batch)
