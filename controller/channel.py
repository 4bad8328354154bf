"""The controller's channel manager: one queue, one connection and one sender task per broker.

Kafka's ControllerChannelManager keeps exactly one control request in flight per broker, so a
broker applies LeaderAndIsr, UpdateMetadata and StopReplica in the order the controller decided
them. A request that fails (refused connection, reset, timeout, garbled response) is never skipped:
the connection is closed and the same request is sent again after a short backoff, until it gets a
response or the broker is removed (it died, bounced, or this controller resigned).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.request_batch import OutgoingRequest
from daemon.eventlog import EventLog
from daemon.metric_kinds import Timer
from daemon.metrics import Metrics
from daemon.supervision import start_supervised
from network.connection import KafkaConnection
from protocol import CONTROL_APIS, ErrorCode
from protocol.registry import api_spec
from security.config import ClientSecurity

__all__ = ["ChannelManager", "Connect", "ControlConnection", "ResponseCallback", "refused_partitions"]

log = logging.getLogger("controller.channel")

ResponseCallback = Callable[[OutgoingRequest, dict[str, Any]], None]
"""Called on the loop with the request and its decoded response body."""

_DOMAIN, _TYPE = "kafka.controller", "ControllerChannelManager"


class ControlConnection(Protocol):
    """What the channel uses of a connection to a broker (``KafkaConnection``, or a simulated one)."""

    @property
    def closed(self) -> bool: ...

    @property
    def next_correlation_id(self) -> int: ...

    async def send(
        self, api_key: int, api_version: int, body: bytes, *, timeout: float, dialect: Any
    ) -> tuple[int, dict[str, Any]]: ...

    async def close(self) -> None: ...


Connect = Callable[..., Awaitable[ControlConnection]]
"""Opens a connection: ``(host, port, *, client_id, connect_timeout, security)``, as
``KafkaConnection.open`` does."""


Marks = dict[int, tuple["_Broker", int]]
"""Broker id -> (its channel, how many requests had been queued on it)."""


@dataclass(slots=True)
class _QueueItem:
    request: OutgoingRequest
    callback: ResponseCallback | None
    enqueued_at: float


@dataclass(eq=False)
class _Broker:
    """One destination: its endpoint, its queue, and the task that drains it."""

    broker_id: int
    host: str
    port: int
    security: ClientSecurity | None = None
    queue: asyncio.Queue[_QueueItem] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    connection: ControlConnection | None = None
    queued: int = 0
    """Requests ever queued for this channel."""
    answered: int = 0
    """Of those, how many have been answered (in queue order)."""

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


class ChannelManager:
    """Sends control requests to brokers, one at a time per broker, resending until each succeeds.

    Must be used from the event loop's thread; ``add_broker`` starts a task on the running loop.
    """

    def __init__(
        self,
        controller_id: int,
        *,
        socket_timeout_s: float = 30.0,
        reconnect_backoff_s: float = 0.1,
        events: EventLog | None = None,
        metrics: Metrics | None = None,
        connect: Connect = KafkaConnection.open,
    ) -> None:
        """``connect``: how a broker is reached (the simulator passes its own network)."""
        self.controller_id = controller_id
        self._connect = connect
        self.client_id = f"controller-{controller_id}"
        self.socket_timeout_s = socket_timeout_s
        self.reconnect_backoff_s = reconnect_backoff_s
        self._events = events
        self._brokers: dict[int, _Broker] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        """Tasks of removed brokers that have not finished closing yet; ``shutdown`` awaits them."""
        self._queue_time: Timer | None = None
        if metrics is not None:
            self._queue_time = metrics.timer(
                _DOMAIN,
                _TYPE,
                "RequestRateAndQueueTimeMs",
                "Time control requests wait in a broker's queue before being sent, in ms.",
                labels=["broker-id"],
            )
            # Read at scrape time, so a removed broker's series disappears, as Kafka removes its gauge.
            metrics.gauge_family(
                _DOMAIN,
                _TYPE,
                "QueueSize",
                "Control requests waiting in one broker's queue.",
                ["broker-id"],
                lambda: (((broker_id,), size) for broker_id, size in sorted(self.queue_sizes().items())),
            )
            metrics.gauge_fn(
                _DOMAIN,
                _TYPE,
                "TotalQueueSize",
                "Control requests waiting in every broker's queue.",
                self.total_queue_size,
            )

    # -- brokers

    @property
    def broker_ids(self) -> set[int]:
        return set(self._brokers)

    def add_broker(
        self, broker_id: int, host: str, port: int, security: ClientSecurity | None = None
    ) -> None:
        """Start sending to ``broker_id``; a known id is replaced, with a fresh queue and connection.

        ``security``: TLS and SASL towards that broker's listener (None: PLAINTEXT).
        """
        if broker_id in self._brokers:
            self.remove_broker(broker_id)
        broker = _Broker(broker_id, host, port, security)
        broker.task = start_supervised(
            f"Controller-{self.controller_id}-to-broker-{broker_id}-send-thread",
            lambda: self._send_loop(broker),
        )
        broker.task.add_done_callback(self._sender_ended)
        self._brokers[broker_id] = broker
        log.info("controller %d: added broker %d at %s", self.controller_id, broker_id, broker.endpoint)

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to ``broker_id``: its queued requests are dropped and no callback of theirs runs."""
        broker = self._brokers.pop(broker_id, None)
        if broker is None:
            return
        dropped = broker.queue.qsize()
        while not broker.queue.empty():
            broker.queue.get_nowait()
        if broker.task is not None and not broker.task.done():
            broker.task.cancel()  # the task closes its connection on the way out
            self._retiring.add(broker.task)
            broker.task.add_done_callback(self._retiring.discard)
        if self._queue_time is not None:
            self._queue_time.remove(str(broker_id))
        log.info(
            "controller %d: removed broker %d, dropping %d queued requests",
            self.controller_id,
            broker_id,
            dropped,
        )

    async def shutdown(self) -> None:
        """Remove every broker and wait until every sender task has closed its connection."""
        for broker_id in list(self._brokers):
            self.remove_broker(broker_id)
        await asyncio.gather(*self._retiring, return_exceptions=True)

    # -- requests

    def send(self, request: OutgoingRequest, callback: ResponseCallback | None = None) -> None:
        """Queue ``request`` for its broker; dropped with a log line if that broker is not known."""
        if request.api_key not in CONTROL_APIS:
            raise ValueError(
                f"the controller channel only sends control requests, not API key {request.api_key}"
            )
        broker = self._brokers.get(request.broker_id)
        if broker is None:
            log.info(
                "controller %d: not sending %s v%d to broker %d since it is offline",
                self.controller_id,
                api_spec(request.api_key).name,
                request.api_version,
                request.broker_id,
            )
            return
        broker.queue.put_nowait(_QueueItem(request, callback, time.monotonic()))
        broker.queued += 1

    def marks(self) -> Marks:
        """Where each channel's queue ends now, for :meth:`delivered`."""
        return {broker_id: (broker, broker.queued) for broker_id, broker in self._brokers.items()}

    def delivered(self, marks: Marks) -> bool:
        """Whether every request queued before ``marks`` was taken has been answered, or its channel
        closed since (a broker that left, or one re-added with a fresh channel and full metadata)."""
        return all(
            self._brokers.get(broker_id) is not broker or broker.answered >= mark
            for broker_id, (broker, mark) in marks.items()
        )

    def queue_size(self, broker_id: int) -> int:
        """Requests waiting for ``broker_id``, not counting the one in flight; 0 for an unknown broker."""
        broker = self._brokers.get(broker_id)
        return broker.queue.qsize() if broker is not None else 0

    def total_queue_size(self) -> int:
        return sum(self.queue_sizes().values())

    def queue_sizes(self) -> dict[int, int]:
        """Broker id -> queued requests; safe to call from a metrics scrape on another thread."""
        return {broker_id: broker.queue.qsize() for broker_id, broker in list(self._brokers.items())}

    # -- the sender task

    def _sender_ended(self, task: asyncio.Task[None]) -> None:
        """A sender only ends by cancellation (``supervised`` restarts it after an exception)."""
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "controller %d: %s died", self.controller_id, task.get_name(), exc_info=task.exception()
            )

    async def _send_loop(self, broker: _Broker) -> None:
        try:
            while True:
                item = await broker.queue.get()
                queue_ms = (time.monotonic() - item.enqueued_at) * 1000
                if self._queue_time is not None:
                    self._queue_time.labels(str(broker.broker_id)).observe(queue_ms)
                response = await self._deliver(broker, item.request)
                broker.answered += 1
                self._emit_response(broker, item.request, response, queue_ms)
                if item.callback is not None:
                    try:
                        item.callback(item.request, response[1])
                    except Exception:
                        log.exception(
                            "controller %d: callback for %s to broker %d failed",
                            self.controller_id,
                            api_spec(item.request.api_key).name,
                            broker.broker_id,
                        )
        finally:
            if broker.connection is not None:
                await broker.connection.close()

    async def _deliver(self, broker: _Broker, request: OutgoingRequest) -> tuple[int, dict[str, Any], float]:
        """Send ``request`` until it gets a response: (correlation id, body, latency in ms)."""
        while True:
            correlation_id: int | None = None
            try:
                if broker.connection is None or broker.connection.closed:
                    broker.connection = await self._connect(
                        broker.host,
                        broker.port,
                        client_id=self.client_id,
                        connect_timeout=self.socket_timeout_s,
                        security=broker.security,
                    )
                correlation_id = broker.connection.next_correlation_id
                self._emit(
                    "request_sent", broker, request, {"correlation_id": correlation_id, **request.summary}
                )
                sent_at = time.monotonic()
                _, body = await broker.connection.send(
                    request.api_key,
                    request.api_version,
                    request.body,
                    timeout=self.socket_timeout_s,
                    dialect=request.dialect,
                )
                return correlation_id, body, (time.monotonic() - sent_at) * 1000
            except Exception as exc:
                reason = str(exc) or type(exc).__name__
                log.warning(
                    "controller %d: %s to broker %d at %s failed (%s); resending in %d ms",
                    self.controller_id,
                    api_spec(request.api_key).name,
                    broker.broker_id,
                    broker.endpoint,
                    reason,
                    self.reconnect_backoff_s * 1000,
                )
                failure: dict[str, Any] = {} if correlation_id is None else {"correlation_id": correlation_id}
                failure.update(reason=reason, resend_after_ms=self.reconnect_backoff_s * 1000)
                self._emit("request_failed", broker, request, failure)
                if broker.connection is not None:
                    with contextlib.suppress(Exception):
                        await broker.connection.close()
                    broker.connection = None
                await asyncio.sleep(self.reconnect_backoff_s)

    # -- event log

    def _emit(self, kind: str, broker: _Broker, request: OutgoingRequest, fields: dict[str, Any]) -> None:
        if self._events is not None:
            event = {"api": api_spec(request.api_key).name, "api_version": request.api_version}
            event["broker"] = broker.broker_id
            self._events.emit(kind, **event | fields)

    def _emit_response(
        self,
        broker: _Broker,
        request: OutgoingRequest,
        response: tuple[int, dict[str, Any], float],
        queue_ms: float,
    ) -> None:
        if self._events is None:
            return
        correlation_id, body, latency_ms = response
        fields: dict[str, Any] = {"correlation_id": correlation_id, **request.summary}
        fields["error"] = _error_name(body.get("error_code", ErrorCode.NONE))
        refused = refused_partitions(body)
        if refused is not None:
            fields["partition_errors"] = refused
        fields.update(latency_ms=round(latency_ms, 3), queue_ms=round(queue_ms, 3))
        self._emit("response_received", broker, request, fields)


def refused_partitions(body: dict[str, Any]) -> int | None:
    """Partitions a response answered with an error: listed by name (StopReplica, LeaderAndIsr up to
    v4) or grouped by topic id (LeaderAndIsr v5+); None for a response without partitions."""
    if "partition_errors" in body:
        return sum(1 for p in body["partition_errors"] if p["error_code"] != ErrorCode.NONE)
    if "topics" in body:
        return sum(
            1 for t in body["topics"] for p in t["partition_errors"] if p["error_code"] != ErrorCode.NONE
        )
    return None


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
