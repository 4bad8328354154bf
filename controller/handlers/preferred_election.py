"""Preferred leader elections: moving leadership back to each partition's first replica.

Requested ones come from ``/admin/preferred_replica_election`` (ZkPreferredReplicaElection); with
``auto.leader.rebalance.enable`` a timer checks every ``leader.imbalance.check.interval.seconds``
and moves the leadership of each broker whose share of misplaced leaders exceeds
``leader.imbalance.per.broker.percentage`` (AutoPreferredReplicaLeaderElection).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller import events, queries
from controller import state_machines as machines
from controller.model import TopicPartition
from controller.partition_changes import ElectionStrategy
from controller.services import ControllerServices
from controller.state_tables import PartitionState
from zkstore import znodes
from zkstore.ops import Delete

log = logging.getLogger("controller")

AUTO_REBALANCE_FIRST_DELAY_S = 5.0
"""Kafka runs the first imbalance check 5 s after failover."""


class PreferredElections:
    def __init__(self, services: ControllerServices) -> None:
        self.services = services
        self.context = services.context

    async def on_zk_preferred_election(self, _: events.ZkPreferredReplicaElection) -> None:
        svc = self.services
        if not svc.is_active:
            return
        found = await svc.store.data_if_exists(
            znodes.PREFERRED_REPLICA_ELECTION, watch=svc.watches.preferred_election
        )
        if found is None:
            return
        data, version = found
        partitions = (
            znodes.decode_preferred_replica_election(data, znodes.PREFERRED_REPLICA_ELECTION) or set()
        )
        await self._elect(sorted(partitions), "requested")
        await svc.store.commit_ignoring_missing([Delete(znodes.PREFERRED_REPLICA_ELECTION, version)])

    def start_auto_rebalance(self) -> None:
        """Failover: the first imbalance check, when automatic rebalancing is enabled."""
        if self.services.config.auto_leader_rebalance_enable:
            self.services.schedule(AUTO_REBALANCE_FIRST_DELAY_S, events.AutoPreferredReplicaLeaderElection())

    async def on_auto_rebalance(self, _: events.AutoPreferredReplicaLeaderElection) -> None:
        ctx, svc = self.context, self.services
        if not svc.is_active:
            return
        try:
            threshold = svc.config.leader_imbalance_per_broker_percentage / 100
            for broker, (off, total) in sorted(queries.imbalanced_partitions(ctx).items()):
                if total == 0 or off / total <= threshold:
                    continue
                log.info(
                    "broker %d leads %d of its %d preferred partitions' leadership away", broker, off, total
                )
                await self._elect(queries.auto_rebalance_candidates(ctx, broker), "auto")
        finally:
            if svc.is_active:
                svc.schedule(
                    svc.config.leader_imbalance_check_interval_s, events.AutoPreferredReplicaLeaderElection()
                )

    async def _elect(self, partitions: Iterable[TopicPartition], trigger: str) -> None:
        ctx, svc = self.context, self.services
        candidates = queries.preferred_election_candidates(ctx, partitions)
        if not candidates:
            return
        log.info("%s preferred leader election for %d partitions", trigger, len(candidates))
        batch = svc.new_batch()
        await svc.apply(
            machines.partitions_to(ctx, batch, candidates, PartitionState.ONLINE, ElectionStrategy.PREFERRED)
        )
        svc.send(batch)
