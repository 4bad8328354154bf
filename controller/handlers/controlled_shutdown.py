"""The ControlledShutdown RPC: move leadership off a broker that is about to stop, before it stops.

The request is fenced by the broker's epoch (KIP-380: a stale one gets STALE_BROKER_EPOCH). The broker
joins ``shutting_down``, which keeps it out of every ISR and election from now on (KIP-841); the
partitions it leads get a controlled-shutdown election, those it follows drop it from their ISR, and
the answer lists the partitions it still leads, for which it asks again.
"""

from __future__ import annotations

import logging
import time

from controller import collector, events, queries
from controller import state_machines as machines
from controller.model import TopicPartition
from controller.partition_changes import ElectionStrategy
from controller.services import ControllerServices
from controller.state_tables import PartitionState, ReplicaState
from protocol import UNKNOWN_BROKER_EPOCH, ErrorCode

log = logging.getLogger("controller")


class ControlledShutdowns:
    def __init__(self, services: ControllerServices) -> None:
        self.services = services
        self.context = services.context

    async def on_controlled_shutdown(self, event: events.ControlledShutdown) -> None:
        ctx, svc = self.context, self.services
        broker_id = event.broker_id
        if not svc.is_active:
            self._reject(event, ErrorCode.STALE_CONTROLLER_EPOCH, "not the active controller")
            return
        cached = ctx.brokers.get(broker_id)
        if (
            event.broker_epoch != UNKNOWN_BROKER_EPOCH
            and cached is not None
            and event.broker_epoch < cached.epoch
        ):
            self._reject(
                event,
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker epoch {event.broker_epoch:#x} is older than the registered {cached.epoch:#x}",
            )
            return
        if cached is None:
            self._reject(event, ErrorCode.BROKER_NOT_AVAILABLE, "broker is not registered")
            return
        started = time.monotonic()
        ctx.shutting_down.add(broker_id)
        svc.event_log.emit(
            "controlled_shutdown_started",
            api_version=event.version,
            broker=broker_id,
            broker_epoch=event.broker_epoch,
            controller_epoch=ctx.epoch,
        )
        partitions = queries.partitions_to_move_off(ctx, broker_id)
        led, followed = self._split_by_leader(partitions, broker_id)
        with collector.held_off():  # a new leadership for each of up to every partition
            batch = svc.new_batch()
            await svc.apply(
                machines.partitions_to(
                    ctx, batch, led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
                )
            )
            svc.send(batch)
            batch = svc.new_batch()
            await svc.apply(
                machines.replicas_to(ctx, batch, [(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
            )
            svc.send(batch)
        # The same partitions as before the writes: handling changes no assignment, topic or deletion.
        remaining = sorted(self._split_by_leader(partitions, broker_id)[0])
        svc.event_log.emit(
            "controlled_shutdown_handled",
            broker=broker_id,
            led=len(led),
            followed=len(followed),
            remaining=len(remaining),
            duration_ms=round((time.monotonic() - started) * 1000, 3),
        )
        event.reply.set_result(
            {
                "error_code": ErrorCode.NONE,
                "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
            }
        )

    def _split_by_leader(
        self, partitions: list[TopicPartition], broker_id: int
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """``partitions`` that ``broker_id`` leads, and the others, in one pass over their leadership."""
        leadership = self.context.leadership
        led: list[TopicPartition] = []
        others: list[TopicPartition] = []
        for tp in partitions:
            (led if leadership[tp].leader_and_isr.leader == broker_id else others).append(tp)
        return led, others

    def _reject(self, event: events.ControlledShutdown, error: ErrorCode, reason: str) -> None:
        broker_id = event.broker_id
        log.warning("controlled shutdown of broker %d rejected with %s: %s", broker_id, error.name, reason)
        cached = self.context.brokers.get(broker_id)
        self.services.event_log.emit(
            "rpc_rejected",
            api="ControlledShutdown",
            api_version=event.version,
            broker=broker_id,
            broker_epoch=event.broker_epoch,
            cached_epoch=cached.epoch if cached is not None else None,
            error=error.name,
            reason=reason,
        )
        event.reply.set_result({"error_code": error, "remaining_partitions": []})
