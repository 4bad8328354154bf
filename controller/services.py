"""What every handler family may use of the rest of the controller, and nothing more.

Kafka's controller handed its helpers the whole ``KafkaController`` and later had to cut a narrow
interface out of it (``DeletionClient``). Here each family in ``controller/handlers/`` gets this
object from the start: the context and the store, the state-machine interpreter, the event log,
request batches to brokers, the watches to re-arm, timers, and the event queue. A family that needs
another family's work (reassignment resuming deletions, say) is given that family explicitly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.protocol.states import WatchedEvent

from controller import events
from controller.channel import ChannelManager
from controller.config import ControllerConfig
from controller.context import ControllerContext, LiveBroker
from controller.request_batch import (
    OutgoingRequest,
    RequestBatch,
    controller_as_live_broker,
    deletion_errors,
)
from controller.state_machines import Steps
from controller.state_writer import StateWriter
from controller.stats import ControllerStats
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from protocol import ApiKey, ErrorCode
from zkstore.znodes import Endpoint

log = logging.getLogger("controller")

T = TypeVar("T")

Watch = Callable[[WatchedEvent], None]


@dataclass(frozen=True, slots=True)
class Watches:
    """The controller's watch handlers (``controller.py`` holds them), for the reads that re-arm them."""

    controller: Watch
    brokers: Watch
    broker: Watch
    topics: Watch
    topic: Watch
    delete_topics: Watch
    reassignment: Watch
    preferred_election: Watch
    isr_notifications: Watch


class ControllerServices:
    def __init__(
        self,
        config: ControllerConfig,
        context: ControllerContext,
        store: ControllerStore,
        event_log: EventLog,
        channel: ChannelManager,
        stats: ControllerStats,
        watches: Watches,
        enqueue: Callable[[events.ControllerEvent], None],
    ) -> None:
        self.config = config
        self.context = context
        self.store = store
        self.event_log = event_log
        self.watches = watches
        self.stats = stats
        self.enqueue = enqueue
        self._channel = channel
        self._writer = StateWriter(
            context, store, event_log, stats, unclean_default=config.unclean_leader_election_enable
        )
        self._timers: list[asyncio.TimerHandle] = []
        self._as_broker: dict[str, Any] | None = None

    @property
    def is_active(self) -> bool:
        """True while this controller holds the fencing token of the current epoch."""
        return self.store.writer is not None

    # -- state changes

    async def apply(self, steps: Steps[T]) -> T:
        """Run a state-machine transition, committing the ZooKeeper writes it asks for."""
        return await self._writer.apply(steps)

    # -- requests to brokers

    def advertise(self, endpoint: Endpoint, clients: tuple[tuple[Endpoint, str], ...] = ()) -> None:
        """Where brokers reach the RPC listener, and clients the client listeners (endpoint, security
        protocol): on Kafka 3.9's wire, UpdateMetadata lists this controller among the live brokers
        there, the RPC listener under the names Kafka's brokers look it up by."""
        config = self.config
        if config.listed_as_broker:
            self._as_broker = controller_as_live_broker(
                config.controller_id,
                endpoint,
                config.listener_protocol,
                config.broker_facing_listener_names,
                clients,
            )

    def new_batch(self) -> RequestBatch:
        config = self.config
        return RequestBatch(
            self.context, config.control_wire, config.inter_broker_listener_name, self._as_broker
        )

    def send(self, batch: RequestBatch) -> None:
        """Encode the batch (UpdateMetadata once in max_broker_epoch mode) and queue it per broker."""
        if batch.empty or not self.is_active:
            return
        requests = batch.build()
        self.stats.encodes += batch.encodes
        self.stats.bytes_encoded += batch.bytes_encoded
        for request in requests:
            self._channel.send(request, self._on_response)

    def _on_response(self, request: OutgoingRequest, response: dict[str, Any]) -> None:
        broker = request.broker_id
        if request.api_key == ApiKey.LEADER_AND_ISR:
            self.enqueue(events.LeaderAndIsrResponseReceived(broker_id=broker, response=response))
        elif request.api_key == ApiKey.UPDATE_METADATA:
            self.enqueue(events.UpdateMetadataResponseReceived(broker_id=broker, response=response))
        elif request.api_key == ApiKey.STOP_REPLICA and request.deleting:
            self.enqueue(
                events.TopicDeletionStopReplicaResponse(
                    broker_id=broker,
                    error=response.get("error_code", ErrorCode.NONE),
                    partition_errors=deletion_errors(request, response),
                )
            )

    def connect(self, broker: LiveBroker) -> None:
        """Start a channel to ``broker``'s control-plane endpoint (replacing any channel it had)."""
        endpoint = self._endpoint_for(broker)
        if endpoint is None:
            log.error(
                "broker %d advertises neither %s nor %s; it will not receive control requests",
                broker.broker_id,
                self.config.control_plane_listener_name,
                self.config.inter_broker_listener_name,
            )
            return
        protocol = broker.registration.security_protocol(endpoint)
        self._channel.add_broker(
            broker.broker_id, endpoint.host, endpoint.port, self.config.dialing(protocol)
        )

    def disconnect(self, broker_id: int) -> None:
        """Close ``broker_id``'s channel, dropping what is queued for it."""
        self._channel.remove_broker(broker_id)

    def _endpoint_for(self, broker: LiveBroker) -> Endpoint | None:
        """KIP-291: the broker's control-plane listener when it has one, else its inter-broker listener."""
        registration = broker.registration
        name = self.config.control_plane_listener_name
        endpoint = registration.endpoint(name) if name else None
        return endpoint or registration.endpoint(self.config.inter_broker_listener_name)

    # -- timers

    def schedule(self, delay_s: float, event: events.ControllerEvent) -> None:
        """Queue ``event`` after ``delay_s``; cancelled when this controller resigns."""
        loop = asyncio.get_running_loop()
        self._timers = [t for t in self._timers if not t.cancelled()]
        self._timers.append(loop.call_later(delay_s, self.enqueue, event))

    # -- resignation

    async def stop_acting(self) -> None:
        """What resigning leaves behind: no fencing token, no timers, no channels, an empty context."""
        self.store.fence(None)
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        await self._channel.shutdown()
        self.context.reset()
