"""The controller: wiring, the ZooKeeper watch registry, and the table that dispatches each event.

It decides nothing itself. Each family of events has its handler module in ``controller/handlers/``;
they all run on the event-manager task, one event at a time, and reach the rest of the controller
through ``ControllerServices``. What runs elsewhere only enqueues events: the watch handlers here,
connection-state changes, RPC arrivals (``handle_*``), broker responses and timers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import EventType, WatchedEvent

from controller import events
from controller.channel import ChannelManager, Connect
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.event_manager import EventManager, EventTimings
from controller.events import ControllerState
from controller.handlers import admin_requests, responses
from controller.handlers.brokers import BrokerChanges
from controller.handlers.controlled_shutdown import ControlledShutdowns
from controller.handlers.election import ControllerElection
from controller.handlers.failover import Failover
from controller.handlers.isr_changes import IsrChanges
from controller.handlers.preferred_election import PreferredElections
from controller.handlers.reassignment import Reassignments
from controller.handlers.topic_deletion import TopicDeletions
from controller.handlers.topics import TopicChanges
from controller.services import ControllerServices, Watches
from controller.stats import ControllerStats
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from daemon.metrics import Metrics
from network.connection import KafkaConnection
from protocol import UNKNOWN_BROKER_EPOCH, ApiKey, ErrorCode
from protocol.error_response import error_response_body
from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.fencing import ControllerMoved
from zkstore.producer_id_blocks import claim_block
from zkstore.znodes import Endpoint

log = logging.getLogger("controller")

SHUTDOWN_TIMEOUT_S = 30.0
"""How long ``stop`` waits for the Shutdown event to resign before closing the session anyway."""

Handler = Callable[[Any], Awaitable[None]]


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
        connect: Connect | None = None,
    ) -> None:
        """``zk`` and ``connect`` are the seams the simulator (``controller.sim``) replaces: the
        ZooKeeper session and how brokers are reached."""
        self.config = config
        self.id = config.controller_id
        self.zk = zk or AsyncZooKeeper(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connect_timeout_s=config.zookeeper_connection_timeout_s,
            security=config.zk_security,
        )
        self.store = ControllerStore(self.zk)
        self.context = ControllerContext(self.id)
        self.stats = ControllerStats()
        self.event_log = event_log or EventLog(None, f"controller-{self.id}")
        self.event_manager = EventManager(self._process, timings)
        self.channel = channel = ChannelManager(
            self.id,
            socket_timeout_s=config.socket_timeout_s,
            events=self.event_log,
            metrics=metrics,
            connect=connect or KafkaConnection.open,
        )
        self.services = ControllerServices(
            config,
            self.context,
            self.store,
            self.event_log,
            channel,
            self.stats,
            self._watches(),
            self.event_manager.put,
        )
        svc = self.services
        deletions = TopicDeletions(svc)
        reassignments = Reassignments(svc, deletions)
        topics = TopicChanges(svc)
        brokers = BrokerChanges(svc, reassignments, deletions)
        isr_changes = IsrChanges(svc, reassignments)
        preferred = PreferredElections(svc)
        shutdowns = ControlledShutdowns(svc)
        admin = admin_requests.AdminRequests(svc, reassignments)
        failover = Failover(svc, topics, deletions, reassignments, isr_changes, preferred)
        self.election = ControllerElection(svc, failover, brokers, topics, config.advertised)
        svc.advertise(config.advertised)  # the daemon sets the bound port before the controller starts
        election = self.election
        self._handlers: dict[type[events.ControllerEvent], Handler] = {
            events.Startup: election.on_startup,
            events.ControllerChange: election.on_controller_change,
            events.Reelect: election.on_reelect,
            events.Expire: election.on_expire,
            events.Resync: election.on_resync,
            events.Shutdown: election.on_shutdown,
            events.BrokerChange: brokers.on_broker_change,
            events.BrokerModifications: brokers.on_broker_modifications,
            events.TopicChange: topics.on_topic_change,
            events.PartitionModifications: topics.on_partition_modifications,
            events.TopicDeletion: deletions.on_topic_deletion,
            events.TopicDeletionStopReplicaResponse: deletions.on_stop_replica_response,
            events.ZkPartitionReassignment: reassignments.on_zk_reassignment,
            events.AutoPreferredReplicaLeaderElection: preferred.on_auto_rebalance,
            events.ZkPreferredReplicaElection: preferred.on_zk_preferred_election,
            events.IsrChangeNotification: isr_changes.on_isr_change_notification,
            events.LeaderAndIsrResponseReceived: partial(responses.on_leader_and_isr_response, self.context),
            events.UpdateMetadataResponseReceived: responses.on_update_metadata_response,
            events.ControlledShutdown: shutdowns.on_controlled_shutdown,
            events.AlterPartitionReceived: isr_changes.on_alter_partition,
            events.ElectLeadersReceived: admin.on_elect_leaders,
            events.AlterReassignmentsReceived: admin.on_alter_reassignments,
            events.ListReassignmentsReceived: admin.on_list_reassignments,
        }

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_active(self) -> bool:
        return self.services.is_active

    def idle(self) -> bool:
        """No event is being handled or waiting: every decision made so far has queued its requests."""
        return self.event_manager.size == 0 and self.event_manager.state is ControllerState.IDLE

    @property
    def rpc_endpoint(self) -> Endpoint:
        return self.election.rpc_endpoint

    def set_rpc_endpoint(self, endpoint: Endpoint, clients: tuple[tuple[Endpoint, str], ...] = ()) -> None:
        """Where brokers reach our RPC listener (published in ``/controller`` when we win, and, on Kafka
        3.9's wire, among UpdateMetadata's live brokers), and clients our client listeners (endpoint,
        security protocol; listed there too)."""
        self.election.rpc_endpoint = endpoint
        self.services.advertise(endpoint, clients)

    async def start(self) -> None:
        """Connect to ZooKeeper and start competing for leadership."""
        await self.zk.start()
        self.zk.on_connection_event(self._on_connection_event)
        self.event_manager.start()
        self.event_manager.put(events.Startup())

    async def stop(self) -> None:
        """Resign cleanly (delete ``/controller`` if ours) and disconnect."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.event_manager.clear_and_put(events.Shutdown(done=done))
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout=SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            log.warning("controller %d: shutdown event did not finish in %.0f s", self.id, SHUTDOWN_TIMEOUT_S)
        await self.event_manager.stop()
        await self.zk.close()
        self.event_log.close()

    # ------------------------------------------------------------------ dispatch

    async def _process(self, event: events.ControllerEvent) -> None:
        """Run ``event``'s handler; a caller it leaves unanswered gets the error at once."""
        try:
            try:
                await self._handlers[type(event)](event)
            except ControllerMoved as exc:
                event.fail(moved=True)
                await self.election.on_fenced_write(event, exc)
        except SessionExpiredError:
            # Not a fault of the handler (nor of the resignation after a fenced write): the Expire
            # event is queued and resigns.
            log.warning(
                "controller %d: ZooKeeper session expired while processing %s", self.id, type(event).__name__
            )
        finally:
            event.fail(moved=False)  # nothing if answered: an exception, or a handler that forgot

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        if event is ConnectionEvent.EXPIRED:
            self.event_manager.clear_and_put(events.Expire())
        elif event is ConnectionEvent.RECONNECTED:
            self.event_manager.put(events.Resync())

    # ------------------------------------------------------------------ the watch registry
    # On the loop (``AsyncZooKeeper.watcher`` posts them there); they only enqueue.

    def _watches(self) -> Watches:
        return Watches(
            controller=self._watch_controller,
            brokers=lambda _: self.event_manager.put(events.BrokerChange()),
            broker=self._watch_broker,
            topics=lambda _: self.event_manager.put(events.TopicChange()),
            topic=self._watch_topic,
            delete_topics=lambda _: self.event_manager.put(events.TopicDeletion()),
            # the reassignment handler re-reads and re-arms
            reassignment=lambda _: self.event_manager.put(events.ZkPartitionReassignment()),
            preferred_election=self._watch_preferred_election,
            isr_notifications=lambda _: self.event_manager.put(events.IsrChangeNotification()),
        )

    def _watch_controller(self, event: WatchedEvent) -> None:
        if event.type == EventType.DELETED:
            self.event_manager.put(events.Reelect())
        elif event.type in (EventType.CREATED, EventType.CHANGED):
            self.event_manager.put(events.ControllerChange())

    def _watch_broker(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHANGED:
            broker_id = event.path.rsplit("/", 1)[-1]
            if broker_id.isdigit():
                self.event_manager.put(events.BrokerModifications(broker_id=int(broker_id)))

    def _watch_topic(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHANGED:
            self.event_manager.put(events.PartitionModifications(topic=event.path.rsplit("/", 1)[-1]))

    def _watch_preferred_election(self, event: WatchedEvent) -> None:
        if event.type == EventType.CREATED:
            self.event_manager.put(events.ZkPreferredReplicaElection())

    # ------------------------------------------------------------------ RPC entry points (off the event task)

    async def handle_controlled_shutdown(
        self, broker_id: int, broker_epoch: int, version: int = 2
    ) -> dict[str, Any]:
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.event_manager.put(
            events.ControlledShutdown(
                broker_id=broker_id, broker_epoch=broker_epoch, version=version, reply=reply
            )
        )
        return await reply

    async def handle_alter_partition(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        if not self.is_active:  # Kafka answers this one before queueing
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.event_manager.put(events.AlterPartitionReceived(request=request, version=version, reply=reply))
        return await reply

    async def handle_allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict[str, Any]:
        """A block of producer ids for a Kafka broker (IBP 3.0-IV0 and later ask the controller): refused
        NOT_CONTROLLER unless active, BROKER_ID_NOT_REGISTERED for an unknown broker, STALE_BROKER_EPOCH
        for an older generation of it (Kafka's checks); otherwise claimed in ZooKeeper in its name."""

        def answer(code: ErrorCode, start: int = -1, length: int = 0) -> dict[str, Any]:
            return {
                "throttle_time_ms": 0,
                "error_code": code,
                "producer_id_start": start,
                "producer_id_len": length,
            }

        if not self.is_active:
            return answer(ErrorCode.NOT_CONTROLLER)
        live = self.context.brokers.get(broker_id)
        if live is None:
            return answer(ErrorCode.BROKER_ID_NOT_REGISTERED)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < live.epoch:
            return answer(ErrorCode.STALE_BROKER_EPOCH)
        block, attempts = await claim_block(self.zk, broker_id)
        log.info("producer ids %d-%d allocated to broker %d", block.first, block.last, broker_id)
        self.event_log.emit(
            "producer_ids_allocated", broker=broker_id, first=block.first, last=block.last, attempts=attempts
        )
        return answer(ErrorCode.NONE, block.first, block.size)

    async def handle_admin_request(
        self, api_key: ApiKey, request: dict[str, Any], version: int
    ) -> dict[str, Any]:
        """ElectLeaders, AlterPartitionReassignments or ListPartitionReassignments forwarded by a
        broker: NOT_CONTROLLER at once unless active, else run as a controller event."""
        kind = {
            ApiKey.ELECT_LEADERS: events.ElectLeadersReceived,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: events.AlterReassignmentsReceived,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: events.ListReassignmentsReceived,
        }[api_key]

        def refusal(code: ErrorCode, message: str) -> dict[str, Any]:
            return error_response_body(api_key, version, code, request, message=message)

        if not self.is_active:
            return refusal(ErrorCode.NOT_CONTROLLER, f"controller {self.id} is not the active controller")
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.event_manager.put(kind(request=request, version=version, reply=reply, refusal=refusal))
        return await reply
