"""The controller's Prometheus metrics, under the JMX exporter's names for Kafka's controller MBeans.

Gauges that need a walk over every partition are computed on the event task after each event
(as Kafka's ``updateMetrics`` does) and only read by the scrape thread; cheap ones are read live.
Two additions have no Kafka MBean: the controller epoch and each broker's epoch as the controller
sees it (``kafka_controller_kafkacontroller_brokerepoch{broker_id}``), the numbers KIP-380 is about.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Protocol

from controller import queries
from controller.context import ControllerContext
from controller.event_manager import EventManager
from controller.events import ControllerEvent, ControllerState
from controller.state_tables import ReplicaState
from controller.stats import ControllerStats
from daemon.metrics import Metrics


class ControllerView(Protocol):
    """What the metrics read of a controller: its context, counters, event manager, and whether it leads."""

    @property
    def context(self) -> ControllerContext: ...

    @property
    def stats(self) -> ControllerStats: ...

    @property
    def event_manager(self) -> EventManager: ...

    @property
    def is_active(self) -> bool: ...


DOMAIN = "kafka.controller"
UPDATE_INTERVAL_S = 0.5
"""How stale the partition-walking gauges may get while events keep coming."""

RESPONSE_STATES = frozenset(
    {ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED}
)
"""Events that change nothing the gauges show: no walk after them."""


ADDITIONS = frozenset({"ControllerEpoch"})
"""KafkaController gauges that Kafka does not have."""


class ControllerMetrics:
    """Implements the event manager's timing hooks and the KafkaController gauges."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.controller: ControllerView | None = None
        self.snapshot: dict[str, float] = {}
        self.broker_epochs: dict[int, int] = {}
        self._unclean_seen = 0
        self._last_update = float("-inf")
        self._pending: asyncio.TimerHandle | None = None
        gauges = {
            "ActiveControllerCount": "1 on the active controller, 0 elsewhere",
            "OfflinePartitionsCount": "Partitions without a live leader",
            "PreferredReplicaImbalanceCount": "Partitions not led by their preferred replica",
            "GlobalTopicCount": "Topics in the cluster",
            "GlobalPartitionCount": "Partitions with leadership information",
            "TopicsToDeleteCount": "Topics queued for deletion",
            "ReplicasToDeleteCount": "Replicas of topics queued for deletion not yet deleted",
            "TopicsIneligibleToDeleteCount": "Topics whose deletion waits for offline replicas",
            "ReplicasIneligibleToDeleteCount": "Replicas of topics queued for deletion that cannot go yet",
            "ActiveBrokerCount": "Registered brokers",
            "FencedBrokerCount": "Always 0 in ZooKeeper mode",
            "ControllerEpoch": "The epoch of the active controller (this one, when active)",
        }
        for name, doc in gauges.items():
            metrics.gauge_fn(
                DOMAIN,
                "KafkaController",
                name,
                doc,
                partial(self._snapshot_value, name),
                addition=name in ADDITIONS,
            )
        metrics.gauge_fn(
            DOMAIN,
            "KafkaController",
            "ControllerState",
            "Kafka's ControllerState byte of the running event",
            lambda: self.controller.event_manager.state if self.controller else 0,
        )
        metrics.gauge_fn(
            DOMAIN,
            "ControllerEventManager",
            "EventQueueSize",
            "Events waiting for the event task",
            lambda: self.controller.event_manager.size if self.controller else 0,
        )
        metrics.gauge_family(
            DOMAIN,
            "KafkaController",
            "BrokerEpoch",
            "Each live broker's epoch (czxid of its registration) as the active controller sees it",
            ("broker_id",),
            self._broker_epochs,
            addition=True,
        )
        self.queue_time = metrics.timer(
            DOMAIN, "ControllerEventManager", "EventQueueTimeMs", "Time events wait in the queue (ms)"
        )
        self.unclean = metrics.meter(
            DOMAIN, "ControllerStats", "UncleanLeaderElectionsPerSec", "Unclean leader elections"
        )
        self.state_timers = {
            state: metrics.timer(
                DOMAIN, "ControllerStats", state.timer_name, f"{state.kafka_name} events (ms)"
            )
            for state in ControllerState
            if state.timer_name is not None
        }

    def _snapshot_value(self, name: str) -> float:
        return self.snapshot.get(name, 0)

    def _broker_epochs(self) -> Iterator[tuple[tuple[int], float]]:
        for broker_id, epoch in sorted(self.broker_epochs.items()):
            yield (broker_id,), epoch

    def bind(self, controller: ControllerView) -> None:
        """Read ``controller`` from now on; the gauges follow it after every event (``event_processed``)."""
        self.controller = controller
        self.update()

    def update_soon(self) -> None:
        """After an event: recompute now if the last walk is old enough, else once the interval ends.

        The partition walks cost tens of milliseconds at 100k partitions; bursts of events (many
        AlterPartition requests) must not pay that each time.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside the event loop (tests): nothing to defer to
            self.update()
            return
        wait = self._last_update + UPDATE_INTERVAL_S - loop.time()
        if wait <= 0:
            self.update()
        elif self._pending is None:
            self._pending = loop.call_later(wait, self._deferred_update)

    def _deferred_update(self) -> None:
        self._pending = None
        self.update()

    # -- EventTimings

    def event_dequeued(self, event: ControllerEvent, queue_ms: float) -> None:
        self.queue_time.observe(queue_ms)

    def event_processed(self, event: ControllerEvent, processing_ms: float) -> None:
        timer = self.state_timers.get(event.state)
        if timer is not None:
            timer.observe(processing_ms)
        if event.state not in RESPONSE_STATES:
            self.update_soon()

    # -- gauges computed on the event task

    def update(self) -> None:
        controller = self.controller
        if controller is None:
            return
        with contextlib.suppress(RuntimeError):  # no loop: called from a test or at start-up
            self._last_update = asyncio.get_running_loop().time()
        ctx = controller.context
        active = controller.is_active
        unclean = controller.stats.unclean_elections
        if unclean > self._unclean_seen:
            self.unclean.inc(unclean - self._unclean_seen)
            self._unclean_seen = unclean
        if not active:
            self.snapshot = {}
            self.broker_epochs = {}
            return
        imbalance = sum(off for off, _ in queries.imbalanced_partitions(ctx).values())
        deleting = ctx.topics_to_delete
        self.broker_epochs = ctx.broker_epochs()
        self.snapshot = {
            "ActiveControllerCount": 1,
            "OfflinePartitionsCount": queries.offline_partitions_count(ctx),
            "PreferredReplicaImbalanceCount": imbalance,
            "GlobalTopicCount": len(ctx.assignments),
            "GlobalPartitionCount": len(ctx.leadership),
            "TopicsToDeleteCount": len(deleting),
            "ReplicasToDeleteCount": sum(len(ctx.replicas(tp)) for tp in ctx.partitions_of(deleting)),
            "TopicsIneligibleToDeleteCount": len(ctx.topics_ineligible_for_deletion),
            "ReplicasIneligibleToDeleteCount": sum(
                1
                for (tp, _), state in ctx.replica_states.items()
                if state == ReplicaState.DELETION_INELIGIBLE and tp.topic in deleting
            ),
            "ActiveBrokerCount": len(ctx.brokers),
            "FencedBrokerCount": 0,
            "ControllerEpoch": ctx.epoch,
        }
