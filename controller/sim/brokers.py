"""Simulated brokers for the simulator: registration, the control-request fence, and the network to them.

A broker here is a model, not the broker daemon: it registers through the real ``register_broker``
on its own simulated ZooKeeper session, fences control requests with the broker's own rule
(``protocol.control_requests.broker_epoch_is_stale``, then the controller epoch), keeps the leader
epochs it was given, and answers in the layout of the version asked, through the real codecs. Every
request and every answer waits on the simulated network until the scheduler moves it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import KazooException

from controller.sim.zk_client import SimKazooClient
from controller.sim.zookeeper import SimZooKeeper
from daemon.endpoint import Endpoint
from protocol import ApiKey, ErrorCode, WireDialect, epoch_field
from protocol.control_requests import (
    answers_by_topic_id,
    broker_epoch_is_stale,
    control_error,
    leader_and_isr_answer,
    leader_and_isr_orders,
    stop_replica_answer,
    stop_replica_orders,
)
from protocol.registry import message_codec
from protocol.topic_partition import TopicPartition
from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.registration import register_broker
from zkstore.znodes import BrokerRegistration

__all__ = ["Accepted", "PartitionView", "SimBroker", "SimConnection", "SimNetwork"]

LISTENER = "PLAINTEXT"
PORT = 9093


@dataclass(frozen=True, slots=True)
class Accepted:
    """A control request a broker applied: what the invariants judge."""

    broker: int
    own_epoch: int
    api: str
    version: int
    epoch_field: str
    epoch: int
    controller_epoch: int


@dataclass(slots=True)
class PartitionView:
    """What a broker was last told of one partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]


@dataclass(eq=False)
class SimBroker:
    """One broker id across its lives; ``epoch`` is the current registration's czxid (-1: down)."""

    broker_id: int
    server: SimZooKeeper
    dialect: WireDialect
    epoch: int = -1
    life: int = 0
    alive: bool = False
    registering: bool = False
    controller_epoch: int = -1
    """The highest controller epoch this life has accepted a request from."""
    controller_id: int = -1
    """The controller UpdateMetadata last named."""
    live_brokers: frozenset[int] = frozenset()
    """The brokers UpdateMetadata last listed as alive."""
    partitions: dict[TopicPartition, PartitionView] = field(default_factory=dict)
    accepted: list[Accepted] = field(default_factory=list)
    client: SimKazooClient | None = None
    zk: AsyncZooKeeper | None = None
    spawn: Callable[[str, Coroutine[Any, Any, object]], object] | None = None
    """How the broker starts a task the simulator keeps track of."""

    @property
    def host(self) -> str:
        return f"broker-{self.broker_id}"

    def registration(self) -> bytes:
        endpoint = Endpoint(LISTENER, self.host, PORT)
        return BrokerRegistration(self.broker_id, (endpoint,), {LISTENER: "PLAINTEXT"}, 0).encode()

    async def start(self) -> None:
        """A new life: a new session, registered with the multi-op real brokers use."""
        self.life += 1
        self.client = SimKazooClient(self.server, f"{self.host}.{self.life}")
        self.zk = AsyncZooKeeper("sim", client=self.client)
        self.registering = True
        self.partitions.clear()
        self.controller_epoch = -1
        self.controller_id = -1
        self.live_brokers = frozenset()
        zk = self.zk
        zk.on_connection_event(lambda event: self._on_session(zk, event))
        try:
            await zk.start()
            self.alive = await self._register(zk)
        finally:
            self.registering = False

    async def _register(self, zk: AsyncZooKeeper) -> bool:
        try:
            epoch = await register_broker(zk, self.broker_id, self.registration())
            if zk is self.zk:
                self.epoch = epoch
        except KazooException:
            if zk is self.zk:  # a real broker exits when it cannot register; the simulator may start it again
                self.crash()
            return False
        return zk is self.zk

    def _on_session(self, zk: AsyncZooKeeper, event: ConnectionEvent) -> None:
        """A real broker registers again, with a new epoch, once its session has expired."""
        if event is ConnectionEvent.EXPIRED and self.alive and zk is self.zk and self.spawn is not None:
            self.spawn(f"broker {self.broker_id} registers again", self._register(zk))

    def crash(self) -> None:
        """The process dies: its session lives on in the ensemble until it expires."""
        self.alive = False
        self.epoch = -1
        if self.client is not None:
            self.client.kill()

    def stop(self) -> None:
        """A clean stop: the session is closed, so the registration goes at once."""
        self.alive = False
        self.epoch = -1
        if self.client is not None:
            self.client.stop()

    # -- control requests

    def handle(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to one control request, after the broker's fences."""
        by_id = answers_by_topic_id(version, self.dialect) if api_key == ApiKey.LEADER_AND_ISR else False
        if broker_epoch_is_stale(api_key, version, body, self.epoch, self.dialect):
            return control_error(api_key, body, ErrorCode.STALE_BROKER_EPOCH, by_topic_id=by_id)
        if body["controller_epoch"] < self.controller_epoch:
            return control_error(api_key, body, ErrorCode.STALE_CONTROLLER_EPOCH, by_topic_id=by_id)
        self.controller_epoch = body["controller_epoch"]
        field_name = epoch_field(api_key, version, self.dialect)
        self.accepted.append(
            Accepted(
                self.broker_id, self.epoch, api_key.name, version, field_name, body[field_name],
                body["controller_epoch"],
            )
        )  # fmt: skip
        if api_key == ApiKey.LEADER_AND_ISR:
            return self._leader_and_isr(body, by_id)
        if api_key == ApiKey.STOP_REPLICA:
            errors = {order.tp: ErrorCode.NONE for order in stop_replica_orders(body)}
            for order in stop_replica_orders(body):
                if order.delete:
                    self.partitions.pop(order.tp, None)
            return stop_replica_answer(ErrorCode.NONE, errors)
        self.controller_id = body["controller_id"]
        self.live_brokers = frozenset(b["id"] for b in body["live_brokers"])
        return {"error_code": ErrorCode.NONE}

    def _leader_and_isr(self, body: dict[str, Any], by_id: bool) -> dict[str, Any]:
        errors: dict[TopicPartition, int] = {}
        for order in leader_and_isr_orders(body):
            state = order.state
            known = self.partitions.get(order.tp)
            if known is not None and state["leader_epoch"] < known.leader_epoch:
                errors[order.tp] = ErrorCode.STALE_CONTROLLER_EPOCH  # Kafka's answer to an older epoch
                continue
            self.partitions[order.tp] = PartitionView(
                state["leader"], state["leader_epoch"], tuple(state["isr"]), state["partition_epoch"],
                tuple(state["replicas"]),
            )  # fmt: skip
            errors[order.tp] = ErrorCode.NONE
        return leader_and_isr_answer(body, by_id, ErrorCode.NONE, errors)


class SimConnection:
    """One connection from a controller to a broker; what it sends waits on the network."""

    def __init__(self, network: SimNetwork, broker: SimBroker, client_id: str) -> None:
        self.network = network
        self.broker = broker
        self.life = broker.life
        self.client_id = client_id
        self._closed = False
        self._next = 0
        self.requests: deque[tuple[ApiKey, int, bytes, WireDialect, asyncio.Future[dict[str, Any]]]] = deque()
        """Sent and not yet read by the broker."""
        self.responses: deque[tuple[bytes, ApiKey, int, WireDialect, asyncio.Future[dict[str, Any]]]] = (
            deque()
        )
        """Written by the broker and not yet read by the controller."""

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def next_correlation_id(self) -> int:
        return self._next

    async def send(
        self, api_key: int, api_version: int, body: bytes, *, timeout: float, dialect: Any
    ) -> tuple[int, dict[str, Any]]:
        if self._closed:
            raise ConnectionError(f"connection to broker {self.broker.broker_id} is closed")
        correlation_id = self._next
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.requests.append((ApiKey(api_key), api_version, body, dialect, future))
        try:
            async with asyncio.timeout(timeout):
                return correlation_id, await future
        except TimeoutError:
            self.abort("request timed out")
            raise

    async def close(self) -> None:
        self.abort("closed")

    def abort(self, why: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.network.connections.discard(self)
        pending = [item[-1] for item in (*self.requests, *self.responses)]
        self.requests.clear()
        self.responses.clear()
        for future in pending:
            if not future.done():
                future.set_exception(ConnectionError(why))

    # -- what the scheduler does

    def can_request(self) -> bool:
        return bool(self.requests) and self.broker.alive and self.broker.life == self.life

    def deliver_request(self) -> str:
        """The broker reads and applies the oldest request; its answer waits on the network."""
        api_key, version, body, dialect, future = self.requests.popleft()
        request = message_codec(api_key, version, "request", dialect).decode(body)
        answer = self.broker.handle(api_key, version, request)
        encoded = message_codec(api_key, version, "response", dialect).encode(answer)
        self.responses.append((encoded, api_key, version, dialect, future))
        return f"{api_key.name}"

    def can_respond(self) -> bool:
        return bool(self.responses)

    def deliver_response(self) -> str:
        encoded, api_key, version, dialect, future = self.responses.popleft()
        if not future.done():
            future.set_result(message_codec(api_key, version, "response", dialect).decode(encoded))
        return api_key.name


class SimNetwork:
    """The brokers as the controllers' channels reach them."""

    def __init__(self, brokers: dict[int, SimBroker]) -> None:
        self.brokers = brokers
        self.connections: set[SimConnection] = set()
        self._order: dict[SimConnection, int] = {}
        self._opened = 0

    async def connect(
        self, host: str, port: int, *, client_id: str, connect_timeout: float, security: Any = None
    ) -> SimConnection:
        broker = next((b for b in self.brokers.values() if b.host == host), None)
        if broker is None or not broker.alive or port != PORT:
            raise ConnectionRefusedError(f"{host}:{port} refused the connection")
        connection = SimConnection(self, broker, client_id)
        self.connections.add(connection)
        self._opened += 1
        self._order[connection] = self._opened
        return connection

    def ordered(self) -> list[SimConnection]:
        """Open connections in the order they were opened (a deterministic order to choose from)."""
        return sorted(self.connections, key=self._order.__getitem__)

    def broker_down(self, broker: SimBroker) -> None:
        """A broker's death resets every connection to it."""
        for connection in self.ordered():
            if connection.broker is broker:
                connection.abort(f"broker {broker.broker_id} went down")
