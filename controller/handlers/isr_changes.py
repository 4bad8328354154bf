"""ISR changes proposed by partition leaders: the AlterPartition RPC (KIP-497, with KIP-841's
eligibility check and, from v3, KIP-903's broker epochs) and, from older brokers, ISR change
notifications under ``/isr_change_notification``.

Either way the brokers learn the new ISRs through UpdateMetadata, and a reassignment waiting for its
target replicas to join the ISR may complete.
"""

from __future__ import annotations

import logging

from controller import alter_partition, events
from controller import state_machines as machines
from controller.handlers.reassignment import Reassignments
from controller.model import TopicPartition
from controller.services import ControllerServices
from protocol import ErrorCode
from zkstore import znodes
from zkstore.ops import Delete

log = logging.getLogger("controller")


class IsrChanges:
    def __init__(self, services: ControllerServices, reassignments: Reassignments) -> None:
        self.services = services
        self.context = services.context
        self.reassignments = reassignments

    async def on_alter_partition(self, event: events.AlterPartitionReceived) -> None:
        ctx, svc = self.context, self.services
        request, version = event.request, event.version
        if not svc.is_active:
            event.reply.set_result(
                {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
            )
            return
        plan = alter_partition.validate(ctx, request, version)
        if plan.error:
            cached = ctx.brokers.get(request["broker_id"])
            svc.event_log.emit(
                "rpc_rejected",
                api="AlterPartition",
                api_version=version,
                broker=request["broker_id"],
                broker_epoch=request["broker_epoch"],
                cached_epoch=cached.epoch if cached else None,
                error=plan.error.name,
            )
            event.reply.set_result(alter_partition.response(plan, version))
            return
        changed = 0
        if plan.changes:
            by_tp = {change.tp: key for key, change in plan.changes.items()}
            changes = {change.tp: change for change in plan.changes.values()}
            written = await svc.apply(machines.write_leadership(changes, changes.get, retry_stale=False))
            changed = len(written.done)
            for change in written.done:
                plan.outcomes[by_tp[change.tp]] = ctx.leadership[change.tp].leader_and_isr
            for r in written.refused:
                plan.outcomes[by_tp[r.tp]] = ErrorCode.INVALID_UPDATE_VERSION
                plan.rejected[by_tp[r.tp]] = ErrorCode.INVALID_UPDATE_VERSION
        for (topic_key, partition), error in plan.rejected.items():
            svc.event_log.emit(
                "rpc_rejected",
                api="AlterPartition",
                api_version=version,
                broker=request["broker_id"],
                topic=str(topic_key),
                partition=partition,
                error=error.name,
                live_brokers=sorted(ctx.live_broker_ids),
                shutting_down=sorted(ctx.shutting_down),
            )
        requested = plan.known_partitions(ctx)
        batch = svc.new_batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_ids, requested)
        svc.send(batch)
        event.reply.set_result(alter_partition.response(plan, version))
        svc.event_log.emit(
            "alter_partition_handled",
            api_version=version,
            broker=request["broker_id"],
            partitions=len(plan.order),
            changed=changed,
            rejected=len(plan.rejected),
        )
        await self.reassignments.maybe_complete(requested)

    async def on_isr_change_notification(self, _: events.IsrChangeNotification) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        children = await svc.store.children(
            znodes.ISR_CHANGE_NOTIFICATION, watch=svc.watches.isr_notifications
        )
        if not children:
            return
        paths = [f"{znodes.ISR_CHANGE_NOTIFICATION}/{c}" for c in children]
        partitions: set[TopicPartition] = set()
        for path, data in zip(paths, await svc.store.data_many(paths), strict=True):
            partitions |= znodes.decode_isr_change_notification(data, path) or set()
        known = [tp for tp in partitions if tp in ctx.leadership]
        ctx.leadership.update(await svc.store.leadership(known))
        batch = svc.new_batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_ids, known)
        svc.send(batch)
        await svc.store.commit_ignoring_missing([Delete(p) for p in paths])
        await self.reassignments.maybe_complete(known)

    async def discard_notifications(self) -> None:
        """Failover: notifications written before it are covered by the state it loads; watch for new ones."""
        svc = self.services
        notifications = await svc.store.children(
            znodes.ISR_CHANGE_NOTIFICATION, watch=svc.watches.isr_notifications
        )
        await svc.store.commit([Delete(f"{znodes.ISR_CHANGE_NOTIFICATION}/{n}") for n in notifications])
