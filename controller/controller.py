"""The controller: election, failover, and the handling of every controller event.

This is the imperative shell around the pure core (broker-change classification, elections,
partition-change plans, AlterPartition validation, request batches). Everything here runs on the
event-manager task, one event at a time, except the small callbacks that only enqueue events:
ZooKeeper watches, connection-state changes, RPC arrivals, broker responses and timers.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from controller import alter_partition, events
from controller.broker_change import classify_broker_change
from controller.channel import ChannelManager
from controller.config import ControllerConfig
from controller.context import ControllerContext, LiveBroker
from controller.event_manager import EventManager, EventTimings
from controller.model import Reassignment, TopicPartition
from controller.partition_changes import ElectionStrategy
from controller.reassignment import ReassignmentManager
from controller.request_batch import OutgoingRequest, RequestBatch
from controller.state_machines import Replica, StateMachines
from controller.state_tables import PartitionState, ReplicaState
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from daemon.metrics import Metrics
from protocol import ApiKey, ErrorCode
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.election import resign, try_elect
from zkstore.fencing import ControllerMoved
from zkstore.ops import Delete, SetData
from zkstore.znodes import ControllerRegistration, Endpoint

log = logging.getLogger("controller")

AUTO_REBALANCE_FIRST_DELAY_S = 5.0
"""Kafka runs the first imbalance check 5 s after failover."""

_RESPONSE_EVENTS = (events.LeaderAndIsrResponseReceived, events.UpdateMetadataResponseReceived)


class Controller:
    """One controller candidate; active while it holds the fencing token of the current epoch."""

    def __init__(
        self,
        config: ControllerConfig,
        *,
        event_log: EventLog | None = None,
        metrics: Metrics | None = None,
        zk: AsyncZooKeeper | None = None,
        timings: EventTimings | None = None,
    ) -> None:
        self.config = config
        self.id = config.controller_id
        self.zk = zk or AsyncZooKeeper(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connect_timeout_s=config.zookeeper_connection_timeout_s,
        )
        self.store = ControllerStore(self.zk)
        self.context = ControllerContext(self.id)
        self.event_log = event_log or EventLog(None, f"controller-{self.id}")
        self.metrics = metrics
        self.machines = StateMachines(self.context, self.store, self.event_log, self._on_unclean_election)
        self.event_manager = EventManager(self._process, timings)
        self.channel = ChannelManager(
            self.id, socket_timeout_s=config.socket_timeout_s, events=self.event_log, metrics=metrics
        )
        self.reassignments = ReassignmentManager(self)
        self.active_controller_id = -1
        self.rpc_endpoint: Endpoint = config.advertised
        self._timers: list[asyncio.TimerHandle] = []
        self._handlers: dict[type[events.ControllerEvent], Callable[[Any], Awaitable[None]]] = {
            events.Startup: self._on_startup,
            events.ControllerChange: self._on_controller_change,
            events.Reelect: self._on_reelect,
            events.Expire: self._on_expire,
            events.Resync: self._on_resync,
            events.Shutdown: self._on_shutdown,
            events.BrokerChange: self._on_broker_change,
            events.BrokerModifications: self._on_broker_modifications,
            events.TopicChange: self._on_topic_change,
            events.PartitionModifications: self._on_partition_modifications,
            events.TopicDeletion: self._on_topic_deletion,
            events.TopicDeletionStopReplicaResponse: self._on_deletion_stop_replica_response,
            events.ZkPartitionReassignment: self._on_zk_reassignment,
            events.AutoPreferredReplicaLeaderElection: self._on_auto_rebalance,
            events.ZkPreferredReplicaElection: self._on_zk_preferred_election,
            events.IsrChangeNotification: self._on_isr_change_notification,
            events.LeaderAndIsrResponseReceived: self._on_leader_and_isr_response,
            events.UpdateMetadataResponseReceived: self._on_update_metadata_response,
            events.ControlledShutdown: self._on_controlled_shutdown,
            events.AlterPartitionReceived: self._on_alter_partition,
        }
        self.unclean_elections = 0
        self.encodes = 0
        self.bytes_encoded = 0
        self.on_metrics_update: Callable[[], None] | None = None
        self._shutdown_done: asyncio.Future[None] | None = None
        """Set by ``stop``; the Shutdown event resolves it once resigned."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_active(self) -> bool:
        return self.store.writer is not None

    def set_rpc_endpoint(self, endpoint: Endpoint) -> None:
        """Where brokers reach our RPC listener (published in ``/controller`` when we win)."""
        self.rpc_endpoint = endpoint

    async def start(self) -> None:
        """Connect to ZooKeeper and start competing for leadership."""
        await self.zk.start()
        self.zk.on_connection_event(self._on_connection_event)
        self.event_manager.start()
        self.event_manager.put(events.Startup())

    async def stop(self) -> None:
        """Resign cleanly (delete ``/controller`` if ours) and disconnect."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._shutdown_done = done
        self.event_manager.clear_and_put(events.Shutdown())
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout=30)
        except TimeoutError:
            log.warning("controller %d: shutdown event did not finish in 30 s", self.id)
        await self.event_manager.stop()
        await self.zk.close()
        self.event_log.close()

    # ------------------------------------------------------------------ event plumbing

    def _enqueue(self, event: events.ControllerEvent) -> None:
        self.event_manager.put(event)

    async def _process(self, event: events.ControllerEvent) -> None:
        handler = self._handlers[type(event)]
        try:
            await handler(event)
        except ControllerMoved as exc:
            log.warning(
                "controller %d: %s while processing %s; resigning", self.id, exc, type(event).__name__
            )
            self.event_log.emit(
                "write_fenced", event=type(event).__name__, reason=str(exc), epoch=self.context.epoch
            )
            await self._maybe_resign(force=True)
        finally:
            if not isinstance(event, _RESPONSE_EVENTS) and self.on_metrics_update is not None:
                self.on_metrics_update()

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        if event is ConnectionEvent.EXPIRED:
            self.event_manager.clear_and_put(events.Expire())
        elif event is ConnectionEvent.RECONNECTED:
            self._enqueue(events.Resync())

    # Watch handlers: on the loop, they only enqueue.

    def _watch_controller(self, event: WatchedEvent) -> None:
        if event.type == EventType.DELETED:
            self._enqueue(events.Reelect())
        elif event.type in (EventType.CREATED, EventType.CHANGED):
            self._enqueue(events.ControllerChange())

    def _watch_brokers(self, event: WatchedEvent) -> None:
        self._enqueue(events.BrokerChange())

    def _watch_broker(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHANGED:
            broker_id = event.path.rsplit("/", 1)[-1]
            if broker_id.isdigit():
                self._enqueue(events.BrokerModifications(broker_id=int(broker_id)))

    def _watch_topics(self, event: WatchedEvent) -> None:
        self._enqueue(events.TopicChange())

    def _watch_topic(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHANGED:
            self._enqueue(events.PartitionModifications(topic=event.path.rsplit("/", 1)[-1]))

    def _watch_delete_topics(self, event: WatchedEvent) -> None:
        self._enqueue(events.TopicDeletion())

    def _watch_reassignment(self, event: WatchedEvent) -> None:
        self._enqueue(events.ZkPartitionReassignment())  # the handler re-reads and re-arms

    def _watch_preferred_election(self, event: WatchedEvent) -> None:
        if event.type == EventType.CREATED:
            self._enqueue(events.ZkPreferredReplicaElection())

    def _watch_isr_notifications(self, event: WatchedEvent) -> None:
        self._enqueue(events.IsrChangeNotification())

    # ------------------------------------------------------------------ election and resignation

    async def _on_startup(self, _: events.Startup) -> None:
        await self._elect()

    async def _on_controller_change(self, _: events.ControllerChange) -> None:
        await self._maybe_resign()

    async def _on_reelect(self, _: events.Reelect) -> None:
        await self._maybe_resign()
        await self._elect()

    async def _on_expire(self, _: events.Expire) -> None:
        self.active_controller_id = -1
        if self.is_active:
            await self._on_resignation("ZooKeeper session expired")

    async def _on_resync(self, _: events.Resync) -> None:
        """After a reconnect, re-read what we watch: watches may have fired while we were away."""
        await self._maybe_resign()
        if not self.is_active:
            await self._elect()
            return
        await self._rearm_data_watches()
        for event in (
            events.BrokerChange(),
            events.TopicChange(),
            events.TopicDeletion(),
            events.IsrChangeNotification(),
            events.ZkPreferredReplicaElection(),
            events.ZkPartitionReassignment(),
        ):
            self._enqueue(event)

    async def _rearm_data_watches(self) -> None:
        """kazoo drops every watch when the connection drops (firing each with EventType.NONE, which the
        handlers ignore). The global watches are re-armed by the events Resync enqueues; this re-arms
        each broker's registration watch and each topic's assignment watch, and hands on what changed
        while nothing was watching: endpoint changes and added partitions."""
        ctx = self.context
        for broker_id, fresh in (await self.store.brokers(data_watch=self._watch_broker)).items():
            old = ctx.brokers.get(broker_id)
            if old is not None and fresh.epoch == old.epoch and fresh.registration != old.registration:
                self._enqueue(events.BrokerModifications(broker_id=broker_id))
        assignments = await self.store.assignments(sorted(ctx.assignments), watch=self._watch_topic)
        for topic, assignment in assignments.items():
            if set(assignment.partitions) - set(ctx.assignments.get(topic, {})):
                self._enqueue(events.PartitionModifications(topic=topic))

    async def _on_shutdown(self, _: events.Shutdown) -> None:
        if self.is_active:
            token = self.store.writer.token if self.store.writer else None
            await self._on_resignation("shutting down")
            if token is not None:
                try:
                    await resign(self.zk, token)
                except Exception:
                    log.warning("could not delete /controller on shutdown", exc_info=True)
        done = self._shutdown_done
        if done is not None and not done.done():
            done.set_result(None)

    async def _elect(self) -> None:
        active = await self.store.controller_id(watch=self._watch_controller)
        if active is not None:
            self.active_controller_id = active
            return
        payload = ControllerRegistration(
            self.id, int(time.time() * 1000), self.rpc_endpoint.host, self.rpc_endpoint.port
        ).encode()
        token = await try_elect(self.zk, self.id, payload)
        if token is None:
            self.active_controller_id = (await self.store.controller_id(watch=self._watch_controller)) or -1
            log.info("controller %d: controller %d is active", self.id, self.active_controller_id)
            return
        await self.store.controller_id(watch=self._watch_controller)  # watch our own node
        self.store.fence(token)
        self.context.epoch, self.context.epoch_zk_version = token.epoch, token.zk_version
        self.active_controller_id = self.id
        log.info("controller %d is active with epoch %d", self.id, token.epoch)
        self.event_log.emit(
            "controller_elected",
            controller_id=self.id,
            controller_epoch=token.epoch,
            epoch_zk_version=token.zk_version,
            rpc_endpoint=self.rpc_endpoint.connection_string,
        )
        started = time.monotonic()
        try:
            await self._on_controller_failover()
        except ControllerMoved:
            raise
        except Exception:
            log.exception("controller %d: failover failed; giving up leadership", self.id)
            await self._trigger_controller_move()
            return
        self.event_log.emit(
            "failover_complete",
            controller_epoch=token.epoch,
            brokers=len(self.context.brokers),
            topics=len(self.context.assignments),
            partitions=len(self.context.leadership),
            duration_ms=round((time.monotonic() - started) * 1000, 3),
        )

    async def _maybe_resign(self, *, force: bool = False) -> None:
        was_active = self.is_active
        owner = None
        try:
            data, stat = await self.zk.get(znodes.CONTROLLER, watch=self._watch_controller)
            registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
            self.active_controller_id = registration.broker_id if registration else -1
            owner = stat.ephemeralOwner
        except NoNodeError:
            self.active_controller_id = -1
            await self.zk.exists(znodes.CONTROLLER, watch=self._watch_controller)
        still_ours = self.active_controller_id == self.id and owner == self.zk.session_id
        if was_active and (force or not still_ours):
            await self._on_resignation(
                "controller moved"
                if not still_ours
                else "a fenced write failed: another controller was elected"
            )

    async def _trigger_controller_move(self) -> None:
        token = self.store.writer.token if self.store.writer else None
        await self._on_resignation("failover failed")
        if token is not None:
            await resign(self.zk, token)

    async def _on_resignation(self, reason: str) -> None:
        epoch = self.context.epoch
        log.info("controller %d resigning (epoch %d): %s", self.id, epoch, reason)
        self.store.fence(None)
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        await self.channel.shutdown()
        self.context.reset()
        gc.unfreeze()  # what the last incarnation froze can be collected now
        self.event_log.emit(
            "controller_resigned", controller_id=self.id, controller_epoch=epoch, reason=reason
        )

    # ------------------------------------------------------------------ failover

    async def _on_controller_failover(self) -> None:
        ctx = self.context
        await self.store.ensure_paths(znodes.PERSISTENT_PATHS)
        # Watches first: a change that lands while we load is then seen as an event afterwards.
        await self.store.data_if_exists(
            znodes.PREFERRED_REPLICA_ELECTION, watch=self._watch_preferred_election
        )
        await self.store.data_if_exists(znodes.REASSIGN_PARTITIONS, watch=self._watch_reassignment)
        notifications = await self.store.children(
            znodes.ISR_CHANGE_NOTIFICATION, watch=self._watch_isr_notifications
        )
        await self.store.commit([Delete(f"{znodes.ISR_CHANGE_NOTIFICATION}/{n}") for n in notifications])
        await self._load_context()
        # Deletions in progress: topics with offline replicas cannot progress yet.
        for topic in await self.store.children(znodes.DELETE_TOPICS, watch=self._watch_delete_topics):
            if topic in ctx.assignments:
                ctx.topics_to_delete.add(topic)
                if any(
                    not ctx.is_replica_online(r)
                    for tp in ctx.partitions_of([topic])
                    for r in ctx.replicas(tp)
                ):
                    ctx.topics_ineligible_for_deletion.add(topic)
        # The loaded context lives as long as we lead: keep the collector from re-scanning it.
        gc.freeze()
        # Brokers learn the live brokers before any LeaderAndIsr.
        batch = self._batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_ids)
        self._send(batch)
        await asyncio.sleep(0)  # let the channel start writing while the next batch is built
        self.machines.initialize()
        online: list[Replica] = []
        offline: list[Replica] = []
        for (tp, replica), state in ctx.replica_states.items():
            (online if state is ReplicaState.ONLINE else offline).append((tp, replica))
        batch = self._batch()
        await self.machines.replicas_to(batch, online, ReplicaState.ONLINE)
        self._send(batch)
        await asyncio.sleep(0)
        batch = self._batch()
        await self.machines.replicas_to(batch, offline, ReplicaState.OFFLINE)
        self._send(batch)
        batch = self._batch()
        await self.machines.trigger_online_partition_state_change(
            batch, allow_unclean=self.config.unclean_leader_election_enable
        )
        self._send(batch)
        await self.reassignments.resume_all()
        await self._on_zk_reassignment(events.ZkPartitionReassignment())
        await self._resume_deletions()
        await self._on_zk_preferred_election(events.ZkPreferredReplicaElection())
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_rebalance(AUTO_REBALANCE_FIRST_DELAY_S)

    async def _load_context(self) -> None:
        ctx = self.context
        ctx.brokers = await self.store.brokers(watch=self._watch_brokers, data_watch=self._watch_broker)
        # The view every failover decision is made with; broker_change lines carry it on from here.
        self.event_log.emit(
            "brokers_loaded",
            controller_epoch=ctx.epoch,
            epochs={str(b): info.epoch for b, info in sorted(ctx.brokers.items())},
        )
        topics = await self.store.topics(watch=self._watch_topics)
        await self._add_topics(topics)
        partitions = list(ctx.all_partitions())
        ctx.leadership = await self.store.leadership(partitions)
        ctx.shutting_down.clear()
        for broker in ctx.brokers.values():
            self._add_channel(broker)
        log.info(
            "controller %d loaded %d brokers, %d topics, %d partitions (%d with leadership)",
            self.id,
            len(ctx.brokers),
            len(ctx.assignments),
            len(partitions),
            len(ctx.leadership),
        )

    async def _add_topics(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Read new topics' assignments (watching them), give topic ids to those without; their partitions."""
        ctx = self.context
        assignments = await self.store.assignments(sorted(topics), watch=self._watch_topic)
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
            await self.store.commit([SetData(znodes.topic_path(a.topic), a.encode()) for a in missing_ids])
        return added

    # ------------------------------------------------------------------ requests to brokers

    def _batch(self) -> RequestBatch:
        return RequestBatch(self.context, self.config.epoch_protocol, self.config.inter_broker_listener_name)

    def _send(self, batch: RequestBatch) -> None:
        if batch.empty or not self.is_active:
            return
        requests = batch.build()
        self.encodes += batch.encodes
        self.bytes_encoded += batch.bytes_encoded
        for request in requests:
            self.channel.send(request, self._on_response)

    def _on_response(self, request: OutgoingRequest, response: dict[str, Any]) -> None:
        broker = request.broker_id
        if request.api_key == ApiKey.LEADER_AND_ISR:
            self._enqueue(events.LeaderAndIsrResponseReceived(broker_id=broker, response=response))
        elif request.api_key == ApiKey.UPDATE_METADATA:
            self._enqueue(events.UpdateMetadataResponseReceived(broker_id=broker, response=response))
        elif request.api_key == ApiKey.STOP_REPLICA and request.summary.get("delete"):
            errors = {
                TopicPartition(p["topic_name"], p["partition_index"]): p["error_code"]
                for p in response.get("partition_errors", [])
            }
            self._enqueue(
                events.TopicDeletionStopReplicaResponse(
                    broker_id=broker, error=response.get("error_code", 0), partition_errors=errors
                )
            )

    def _endpoint_for(self, broker: LiveBroker) -> Endpoint | None:
        """KIP-291: the broker's control-plane listener when it has one, else its inter-broker listener."""
        registration = broker.registration
        name = self.config.control_plane_listener_name
        endpoint = registration.endpoint(name) if name else None
        return endpoint or registration.endpoint(self.config.inter_broker_listener_name)

    def _add_channel(self, broker: LiveBroker) -> None:
        endpoint = self._endpoint_for(broker)
        if endpoint is None:
            log.error(
                "broker %d advertises neither %s nor %s; it will not receive control requests",
                broker.broker_id,
                self.config.control_plane_listener_name,
                self.config.inter_broker_listener_name,
            )
            return
        self.channel.add_broker(broker.broker_id, endpoint.host, endpoint.port)

    async def _on_leader_and_isr_response(self, event: events.LeaderAndIsrResponseReceived) -> None:
        error = event.response.get("error_code", 0)
        if error:
            log.error("LeaderAndIsr to broker %d failed: %s", event.broker_id, ErrorCode(error).name)
            return
        failed = [p for p in event.response.get("partition_errors", []) if p.get("error_code")]
        for p in failed:
            log.warning(
                "broker %d: LeaderAndIsr for %s-%d failed: %s",
                event.broker_id,
                p.get("topic_name"),
                p.get("partition_index"),
                ErrorCode(p["error_code"]).name,
            )

    async def _on_update_metadata_response(self, event: events.UpdateMetadataResponseReceived) -> None:
        error = event.response.get("error_code", 0)
        if error:
            log.error("UpdateMetadata to broker %d failed: %s", event.broker_id, ErrorCode(error).name)

    # ------------------------------------------------------------------ brokers

    async def _on_broker_change(self, _: events.BrokerChange) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = await self.store.brokers(watch=self._watch_brokers)
        cached = ctx.broker_epochs()
        change = classify_broker_change(cached, {b: info.epoch for b, info in current.items()})
        if change.empty:
            return
        log.info(
            "broker change: new %s, dead %s, bounced %s",
            list(change.new),
            list(change.dead),
            [f"{b} epoch {cached[b]:#x} -> {current[b].epoch:#x}" for b in change.bounced],
        )
        self.event_log.emit(
            "broker_change",
            controller_epoch=ctx.epoch,
            new=change.new,
            dead=change.dead,
            bounced=change.bounced,
            epochs={str(b): e for b, e in change.epochs.items()},
            previous_epochs={str(b): cached[b] for b in (*change.dead, *change.bounced)},
        )
        for b in change.new:
            ctx.brokers[b] = current[b]
            self._add_channel(current[b])
        for b in (*change.bounced, *change.dead):
            self.channel.remove_broker(b)
        if change.new:
            await self._on_broker_startup(change.new)
        if change.bounced:
            for b in change.bounced:
                del ctx.brokers[b]
            await self._on_broker_failure(change.bounced)
            for b in change.bounced:
                ctx.brokers[b] = current[b]
                self._add_channel(current[b])
            await self._on_broker_startup(change.bounced)
        if change.dead:
            # As in Kafka, dead brokers leave the live set only now, after the new and bounced ones
            # were handled; this line marks the point for readers of the log (the KIP-841 audit).
            for b in change.dead:
                del ctx.brokers[b]
            self.event_log.emit(
                "brokers_removed",
                controller_epoch=ctx.epoch,
                brokers=change.dead,
                epochs={str(b): info.epoch for b, info in sorted(ctx.brokers.items())},
            )
            await self._on_broker_failure(change.dead)

    async def _on_broker_startup(self, new: Iterable[int]) -> None:
        ctx = self.context
        new = sorted(new)
        existing = ctx.live_or_shutting_down_ids - set(new)
        batch = self._batch()
        batch.add_update_metadata(existing)
        self._send(batch)
        batch = self._batch()
        batch.add_update_metadata(new, ctx.leadership.keys())
        self._send(batch)
        replicas = [(tp, b) for tp in ctx.partitions_on_brokers(new) for b in ctx.replicas(tp) if b in new]
        batch = self._batch()
        await self.machines.replicas_to(batch, replicas, ReplicaState.ONLINE)
        self._send(batch)
        batch = self._batch()
        await self.machines.trigger_online_partition_state_change(
            batch, allow_unclean=self.config.unclean_leader_election_enable
        )
        self._send(batch)
        for tp, moving in sorted(ctx.reassignments.items()):
            if set(moving.target) & set(new):
                await self.reassignments.start(tp, moving)
        topics = {tp.topic for tp, _ in replicas} & ctx.topics_to_delete
        if topics:
            ctx.topics_ineligible_for_deletion -= topics
            await self._resume_deletions()
        for b in new:
            await self.store.broker(b, watch=self._watch_broker)

    async def _on_broker_failure(self, dead: Iterable[int]) -> None:
        ctx = self.context
        dead = sorted(dead)
        ctx.shutting_down.difference_update(dead)
        replicas = [(tp, b) for tp in ctx.partitions_on_brokers(dead) for b in ctx.replicas(tp) if b in dead]
        await self._on_replicas_become_offline(replicas)

    async def _on_replicas_become_offline(self, replicas: list[Replica]) -> None:
        ctx = self.context
        deleting = [r for r in replicas if ctx.is_topic_queued_for_deletion(r[0].topic)]
        normal = [r for r in replicas if not ctx.is_topic_queued_for_deletion(r[0].topic)]
        leaderless = [
            tp
            for tp, info in ctx.leadership.items()
            if not ctx.is_replica_online(info.leader_and_isr.leader)
            and not ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        batch = self._batch()
        await self.machines.partitions_to(batch, leaderless, PartitionState.OFFLINE)
        await self.machines.trigger_online_partition_state_change(
            batch, allow_unclean=self.config.unclean_leader_election_enable
        )
        self._send(batch)
        batch = self._batch()
        await self.machines.replicas_to(batch, normal, ReplicaState.OFFLINE)
        self._send(batch)
        if deleting:
            batch = self._batch()
            await self.machines.replicas_to(batch, deleting, ReplicaState.DELETION_INELIGIBLE)
            self._send(batch)
            ctx.topics_ineligible_for_deletion.update(tp.topic for tp, _ in deleting)
        if not leaderless:
            batch = self._batch()
            batch.add_update_metadata(ctx.live_or_shutting_down_ids)
            self._send(batch)

    async def _on_broker_modifications(self, event: events.BrokerModifications) -> None:
        if not self.is_active:
            return
        ctx = self.context
        fresh = await self.store.broker(event.broker_id, watch=self._watch_broker)
        old = ctx.brokers.get(event.broker_id)
        if fresh is None or old is None or fresh.epoch != old.epoch:
            return  # a registration change, handled as a BrokerChange
        if fresh.registration.endpoints != old.registration.endpoints:
            log.info("broker %d changed its endpoints", event.broker_id)
            ctx.brokers[event.broker_id] = fresh
            batch = self._batch()
            batch.add_update_metadata(ctx.live_or_shutting_down_ids)
            self._send(batch)

    # ------------------------------------------------------------------ topics

    async def _on_topic_change(self, _: events.TopicChange) -> None:
        if not self.is_active:
            return
        ctx = self.context
        topics = set(await self.store.topics(watch=self._watch_topics))
        gone = set(ctx.assignments) - topics
        for topic in gone:
            self._forget_topic(topic)
        new = topics - set(ctx.assignments)
        if not new:
            return
        partitions = await self._add_topics(new)
        log.info("new topics %s with %d partitions", sorted(new), len(partitions))
        self.event_log.emit("topics_created", topics=sorted(new), partitions=len(partitions))
        await self._on_new_partition_creation(partitions)

    async def _on_partition_modifications(self, event: events.PartitionModifications) -> None:
        if not self.is_active or event.topic not in self.context.assignments:
            return
        ctx = self.context
        topic = event.topic
        assignments = await self.store.assignments([topic], watch=self._watch_topic)
        assignment = assignments.get(topic)
        if assignment is None:
            return
        known = ctx.assignments[topic]
        added = {p: r for p, r in assignment.partitions.items() if p not in known}
        if not added:
            return
        if ctx.is_topic_queued_for_deletion(topic):
            log.warning("partitions added to %s while it is being deleted; restoring its assignment", topic)
            restored = znodes.TopicAssignment(topic, dict(known), topic_id=ctx.topic_ids.get(topic))
            await self.store.commit([SetData(znodes.topic_path(topic), restored.encode())])
            return
        known.update(added)
        partitions = [TopicPartition(topic, p) for p in sorted(added)]
        self.event_log.emit("partitions_added", topic=topic, partitions=sorted(added))
        await self._on_new_partition_creation(partitions)

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        replicas = [(tp, r) for tp in partitions for r in ctx.replicas(tp)]
        batch = self._batch()
        await self.machines.partitions_to(batch, partitions, PartitionState.NEW)
        await self.machines.replicas_to(batch, replicas, ReplicaState.NEW)
        self._send(batch)
        batch = self._batch()
        await self.machines.partitions_to(batch, partitions, PartitionState.ONLINE)
        self._send(batch)
        batch = self._batch()
        await self.machines.replicas_to(batch, replicas, ReplicaState.ONLINE)
        self._send(batch)

    def _forget_topic(self, topic: str) -> None:
        ctx = self.context
        for tp in ctx.partitions_of([topic]):
            ctx.leadership.pop(tp, None)
            ctx.partition_states.pop(tp, None)
            for r in ctx.replicas(tp):
                ctx.replica_states.pop((tp, r), None)
        ctx.assignments.pop(topic, None)
        ctx.topic_ids.pop(topic, None)
        ctx.topics_to_delete.discard(topic)
        ctx.topics_ineligible_for_deletion.discard(topic)
        ctx.topics_with_deletion_started.discard(topic)
        for tp in [tp for tp in ctx.reassignments if tp.topic == topic]:
            del ctx.reassignments[tp]

    # ------------------------------------------------------------------ topic deletion

    async def _on_topic_deletion(self, _: events.TopicDeletion) -> None:
        if not self.is_active:
            return
        ctx = self.context
        requested = set(await self.store.children(znodes.DELETE_TOPICS, watch=self._watch_delete_topics))
        unknown = sorted(t for t in requested if t not in ctx.assignments)
        if unknown:
            log.info("deletion requested for unknown topics %s; removing the requests", unknown)
            await self._commit_ignoring_missing([Delete(znodes.delete_topic_path(t)) for t in unknown])
        wanted = sorted(requested - set(unknown) - ctx.topics_to_delete)
        if not wanted:
            return
        if not self.config.delete_topic_enable:
            log.info("delete.topic.enable is false: ignoring deletion of %s", wanted)
            self.event_log.emit("topic_deletion_disabled", topics=wanted)
            await self._commit_ignoring_missing([Delete(znodes.delete_topic_path(t)) for t in wanted])
            return
        ctx.topics_to_delete.update(wanted)
        self.event_log.emit("topic_deletion_queued", topics=wanted)
        await self._resume_deletions()

    async def _commit_ignoring_missing(self, ops: list[Any]) -> None:
        for op, result in zip(ops, await self.store.commit(ops), strict=True):
            if isinstance(result, Exception) and not isinstance(result, NoNodeError):
                log.warning("%s %s failed: %r", type(op).__name__, op.path, result)

    async def _resume_deletions(self) -> None:
        ctx = self.context
        for topic in sorted(ctx.topics_to_delete):
            replicas = [(tp, r) for tp in ctx.partitions_of([topic]) for r in ctx.replicas(tp)]
            states = [ctx.replica_states.get(r) for r in replicas]
            if all(s is ReplicaState.DELETION_SUCCESSFUL for s in states):
                await self._complete_topic_deletion(topic, replicas)
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
                batch = self._batch()
                await self.machines.replicas_to(batch, ineligible, ReplicaState.OFFLINE)
                self._send(batch)
            await self._start_topic_deletion(topic, replicas)

    async def _start_topic_deletion(self, topic: str, replicas: list[Replica]) -> None:
        ctx = self.context
        partitions = ctx.partitions_of([topic])
        if topic not in ctx.topics_with_deletion_started:
            ctx.topics_with_deletion_started.add(topic)
            batch = self._batch()
            await self.machines.partitions_to(batch, partitions, PartitionState.OFFLINE)
            await self.machines.partitions_to(batch, partitions, PartitionState.NON_EXISTENT)
            # Leader -2 in UpdateMetadata: brokers drop the partitions from their metadata caches.
            batch.add_update_metadata(ctx.live_or_shutting_down_ids, partitions)
            self._send(batch)
            self.event_log.emit("topic_deletion_started", topic=topic, partitions=len(partitions))
        pending = [r for r in replicas if ctx.replica_states.get(r) is not ReplicaState.DELETION_SUCCESSFUL]
        dead = [r for r in pending if not ctx.is_replica_online(r[1])]
        live = [r for r in pending if ctx.is_replica_online(r[1])]
        batch = self._batch()
        if dead:
            await self.machines.replicas_to(batch, dead, ReplicaState.OFFLINE)
            await self.machines.replicas_to(batch, dead, ReplicaState.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion.add(topic)
        await self.machines.replicas_to(batch, live, ReplicaState.OFFLINE)
        await self.machines.replicas_to(batch, live, ReplicaState.DELETION_STARTED)
        self._send(batch)

    async def _on_deletion_stop_replica_response(
        self, event: events.TopicDeletionStopReplicaResponse
    ) -> None:
        if not self.is_active:
            return
        ctx = self.context
        batch = self._batch()
        failed, succeeded = [], []
        for tp, error in event.partition_errors.items():
            if not ctx.is_topic_queued_for_deletion(tp.topic):
                continue
            replica = (tp, event.broker_id)
            (failed if (error or event.error) else succeeded).append(replica)
        await self.machines.replicas_to(batch, failed, ReplicaState.DELETION_INELIGIBLE)
        await self.machines.replicas_to(batch, succeeded, ReplicaState.DELETION_SUCCESSFUL)
        ctx.topics_ineligible_for_deletion.update(tp.topic for tp, _ in failed)
        self._send(batch)
        await self._resume_deletions()

    async def _complete_topic_deletion(self, topic: str, replicas: list[Replica]) -> None:
        ctx = self.context
        batch = self._batch()
        await self.machines.replicas_to(batch, replicas, ReplicaState.NON_EXISTENT)
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
        await self._commit_ignoring_missing(ops)
        self._forget_topic(topic)
        log.info("topic %s deleted", topic)
        self.event_log.emit("topic_deleted", topic=topic, partitions=len(partitions))

    # ------------------------------------------------------------------ controlled shutdown

    async def _on_controlled_shutdown(self, event: events.ControlledShutdown) -> None:
        ctx = self.context
        broker_id = event.broker_id

        def reject(error: ErrorCode, reason: str) -> None:
            log.warning(
                "controlled shutdown of broker %d rejected with %s: %s", broker_id, error.name, reason
            )
            self.event_log.emit(
                "rpc_rejected",
                api="ControlledShutdown",
                broker=broker_id,
                broker_epoch=event.broker_epoch,
                cached_epoch=ctx.brokers[broker_id].epoch if broker_id in ctx.brokers else None,
                error=error.name,
                reason=reason,
            )
            event.reply.set_result({"error_code": error, "remaining_partitions": []})

        if not self.is_active:
            reject(ErrorCode.STALE_CONTROLLER_EPOCH, "not the active controller")
            return
        cached = ctx.brokers.get(broker_id)
        if event.broker_epoch != -1 and cached is not None and event.broker_epoch < cached.epoch:
            reject(
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker epoch {event.broker_epoch:#x} is older than the registered {cached.epoch:#x}",
            )
            return
        if cached is None:
            reject(ErrorCode.BROKER_NOT_AVAILABLE, "broker is not registered")
            return
        started = time.monotonic()
        ctx.shutting_down.add(broker_id)
        self.event_log.emit(
            "controlled_shutdown_started",
            broker=broker_id,
            broker_epoch=event.broker_epoch,
            controller_epoch=ctx.epoch,
        )

        def movable(tp: TopicPartition) -> bool:
            return (
                len(ctx.replicas(tp)) > 1
                and tp in ctx.leadership
                and not ctx.is_topic_queued_for_deletion(tp.topic)
            )

        partitions = [tp for tp in ctx.partitions_on_brokers([broker_id]) if movable(tp)]
        led = [tp for tp in partitions if ctx.leadership[tp].leader_and_isr.leader == broker_id]
        followed = [tp for tp in partitions if ctx.leadership[tp].leader_and_isr.leader != broker_id]
        batch = self._batch()
        await self.machines.partitions_to(
            batch, led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        self._send(batch)
        batch = self._batch()
        await self.machines.replicas_to(batch, [(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
        self._send(batch)
        remaining = sorted(
            tp
            for tp in ctx.partitions_on_brokers([broker_id])
            if movable(tp) and ctx.leadership[tp].leader_and_isr.leader == broker_id
        )
        self.event_log.emit(
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

    # ------------------------------------------------------------------ AlterPartition

    async def _on_alter_partition(self, event: events.AlterPartitionReceived) -> None:
        ctx = self.context
        request, version = event.request, event.version
        if not self.is_active:
            event.reply.set_result(
                {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
            )
            return
        plan = alter_partition.validate(ctx, request, version)
        if plan.error:
            cached = ctx.brokers.get(request["broker_id"])
            self.event_log.emit(
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
        if plan.changes:
            by_tp = {change.tp: key for key, change in plan.changes.items()}
            changes = {change.tp: change for change in plan.changes.values()}
            done, refused = await self.machines.write(changes, changes.get, retry_stale=False)
            for change in done:
                plan.outcomes[by_tp[change.tp]] = ctx.leadership[change.tp].leader_and_isr
            for r in refused:
                plan.outcomes[by_tp[r.tp]] = ErrorCode.INVALID_UPDATE_VERSION
                plan.rejected[by_tp[r.tp]] = ErrorCode.INVALID_UPDATE_VERSION
        for (topic_key, partition), error in plan.rejected.items():
            self.event_log.emit(
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
        requested = []
        names = {tid: t for t, tid in ctx.topic_ids.items() if tid is not None}
        for topic_key, partition in plan.order:
            topic = names.get(topic_key) if version >= alter_partition.FIRST_TOPIC_ID_VERSION else topic_key
            if isinstance(topic, str) and TopicPartition(topic, partition) in ctx.leadership:
                requested.append(TopicPartition(topic, partition))
        batch = self._batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_ids, requested)
        self._send(batch)
        event.reply.set_result(alter_partition.response(plan, version))
        await self.reassignments.maybe_complete(requested)

    # ------------------------------------------------------------------ ISR change notifications

    async def _on_isr_change_notification(self, _: events.IsrChangeNotification) -> None:
        if not self.is_active:
            return
        children = await self.store.children(
            znodes.ISR_CHANGE_NOTIFICATION, watch=self._watch_isr_notifications
        )
        if not children:
            return
        paths = [f"{znodes.ISR_CHANGE_NOTIFICATION}/{c}" for c in children]
        partitions: set[TopicPartition] = set()
        for path, data in zip(paths, await self.store.data_many(paths), strict=True):
            partitions |= znodes.decode_isr_change_notification(data, path) or set()
        known = [tp for tp in partitions if tp in self.context.leadership]
        self.context.leadership.update(await self.store.leadership(known))
        batch = self._batch()
        batch.add_update_metadata(self.context.live_or_shutting_down_ids, known)
        self._send(batch)
        await self._commit_ignoring_missing([Delete(p) for p in paths])
        await self.reassignments.maybe_complete(known)

    # ------------------------------------------------------------------ preferred leader election

    async def _preferred_election(self, partitions: Iterable[TopicPartition], trigger: str) -> None:
        ctx = self.context
        candidates = [
            tp
            for tp in partitions
            if tp in ctx.leadership
            and not ctx.is_topic_queued_for_deletion(tp.topic)
            and ctx.replicas(tp)
            and ctx.leadership[tp].leader_and_isr.leader != ctx.replicas(tp)[0]
        ]
        if not candidates:
            return
        log.info("%s preferred leader election for %d partitions", trigger, len(candidates))
        batch = self._batch()
        await self.machines.partitions_to(
            batch, candidates, PartitionState.ONLINE, ElectionStrategy.PREFERRED
        )
        self._send(batch)

    async def _on_zk_preferred_election(self, _: events.ZkPreferredReplicaElection) -> None:
        if not self.is_active:
            return
        found = await self.store.data_if_exists(
            znodes.PREFERRED_REPLICA_ELECTION, watch=self._watch_preferred_election
        )
        if found is None:
            return
        data, version = found
        partitions = (
            znodes.decode_preferred_replica_election(data, znodes.PREFERRED_REPLICA_ELECTION) or set()
        )
        await self._preferred_election(sorted(partitions), "requested")
        await self._commit_ignoring_missing([Delete(znodes.PREFERRED_REPLICA_ELECTION, version)])

    def _schedule_auto_rebalance(self, delay_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if not t.cancelled()]
        self._timers.append(
            loop.call_later(delay_s, self._enqueue, events.AutoPreferredReplicaLeaderElection())
        )

    def imbalanced_partitions(self) -> dict[int, tuple[int, int]]:
        """Per preferred broker: (partitions it should lead but does not, partitions it should lead)."""
        ctx = self.context
        counts: dict[int, list[int]] = {}
        for tp, info in ctx.leadership.items():
            replicas = ctx.replicas(tp)
            if not replicas or ctx.is_topic_queued_for_deletion(tp.topic):
                continue
            entry = counts.setdefault(replicas[0], [0, 0])
            entry[1] += 1
            if info.leader_and_isr.leader != replicas[0]:
                entry[0] += 1
        return {b: (c[0], c[1]) for b, c in counts.items()}

    async def _on_auto_rebalance(self, _: events.AutoPreferredReplicaLeaderElection) -> None:
        if not self.is_active:
            return
        ctx = self.context
        try:
            threshold = self.config.leader_imbalance_per_broker_percentage / 100
            for broker, (off, total) in sorted(self.imbalanced_partitions().items()):
                if total == 0 or off / total <= threshold:
                    continue
                candidates = [
                    tp
                    for tp, info in ctx.leadership.items()
                    if ctx.replicas(tp)
                    and ctx.replicas(tp)[0] == broker
                    and info.leader_and_isr.leader != broker
                    and ctx.is_replica_online(broker)
                    and broker in info.leader_and_isr.isr
                ]
                log.info(
                    "broker %d leads %d of its %d preferred partitions' leadership away", broker, off, total
                )
                await self._preferred_election(candidates, "auto")
        finally:
            if self.is_active:
                self._schedule_auto_rebalance(self.config.leader_imbalance_check_interval_s)

    # ------------------------------------------------------------------ reassignment

    async def _on_zk_reassignment(self, _: events.ZkPartitionReassignment) -> None:
        if not self.is_active:
            return
        found = await self.store.data_if_exists(znodes.REASSIGN_PARTITIONS, watch=self._watch_reassignment)
        if found is None:
            return
        requested = znodes.decode_reassignment(found[0], znodes.REASSIGN_PARTITIONS)
        if requested is None:  # corrupt: logged by the decoder; drop it so the next request can be made
            await self._commit_ignoring_missing([Delete(znodes.REASSIGN_PARTITIONS, found[1])])
            return
        await self.reassignments.on_zk_request(requested)

    # ------------------------------------------------------------------ metrics support

    def _on_unclean_election(self, tp: TopicPartition) -> None:
        self.unclean_elections += 1

    def offline_partitions_count(self) -> int:
        ctx = self.context
        return sum(
            1
            for tp, state in ctx.partition_states.items()
            if state is PartitionState.OFFLINE and not ctx.is_topic_queued_for_deletion(tp.topic)
        )

    # ------------------------------------------------------------------ RPC entry points (off the event task)

    async def handle_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> dict[str, Any]:
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._enqueue(events.ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch, reply=reply))
        return await reply

    async def handle_alter_partition(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        if not self.is_active:  # Kafka answers this one before queueing
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._enqueue(events.AlterPartitionReceived(request=request, version=version, reply=reply))
        return await reply
