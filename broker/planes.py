"""The broker's request planes (KIP-291): their queues and handler threads, and a listener per endpoint.

The data plane is ``queued.max.requests`` and ``num.io.threads``. With ``control.plane.listener.name``
there is also a control plane, a queue of 20 (``CONTROL_PLANE_QUEUE_CAPACITY``) and one thread fed
only by that listener, which serves only the control APIs (and ApiVersions), counts against no
``max.connections`` and announces its requests to ``ControlPriority``, so data-plane work gives way.
Without it, control requests wait in the data queue, as in Kafka before KIP-291.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.config import CONTROL_PLANE_QUEUE_CAPACITY, BrokerConfig
from broker.control_priority import ControlPriority
from broker.listener import Listener
from broker.request_channel import Outcome, Request, RequestChannel
from network.connection_quotas import ConnectionQuotas
from network.handshake import CredentialLookup
from protocol import CONTROL_APIS, ApiKey, RequestHeader, UnsupportedVersionError

__all__ = ["CONTROL_LISTENER_APIS", "DATA_PLANE_MAX_WAITING", "ListenerServices", "RequestPlanes"]

CONTROL_LISTENER_APIS = CONTROL_APIS | {ApiKey.API_VERSIONS}
"""What the control-plane listener serves; any other API is answered INVALID_REQUEST."""
DATA_PLANE_MAX_WAITING = 16
"""Answers a client connection may have outstanding (acks=all produces waiting for the ISR)."""


@dataclass(frozen=True, slots=True)
class ListenerServices:
    """What every listener is given: answers the request handling makes, the SCRAM credentials and
    the meters of its connections."""

    unsupported: Callable[[UnsupportedVersionError], bytes]
    api_versions: Callable[[RequestHeader], bytes]
    credentials: CredentialLookup
    on_sent: Callable[[Request], None]
    """A response was written (the request's total time ends there)."""
    on_closed: Callable[[str, str], None]
    """A connection was closed by the broker, with (listener, reason): quota, idle, authentication."""


class RequestPlanes:
    """The planes' channels, built at once; the listeners, built when the broker starts listening."""

    def __init__(self, config: BrokerConfig, handle: Callable[[Request], Outcome]) -> None:
        """``handle`` runs on the handler threads of both planes."""
        self.config = config
        control = config.control_plane_listener_name
        self.priority = ControlPriority() if control else None
        self.data = RequestChannel(
            "DataPlane",
            capacity=config.queued_max_requests,
            threads=config.num_io_threads,
            thread_prefix="data-plane",
            handle=handle,
            yield_to=self.priority,
        )
        self.control = (
            RequestChannel(
                "ControlPlane",
                capacity=CONTROL_PLANE_QUEUE_CAPACITY,
                threads=1,
                thread_prefix="control-plane",
                handle=handle,
            )
            if control
            else None
        )
        self.listeners: dict[str, Listener] = {}

    @property
    def checkpoint(self) -> Callable[[], None] | None:
        """Where data-plane code gives way to pending control work (None without a control plane)."""
        return self.priority.checkpoint if self.priority is not None else None

    async def listen(self, services: ListenerServices) -> dict[str, int]:
        """Open a listener per configured endpoint, each on its plane; returns their bound ports."""
        config = self.config
        control = config.control_plane_listener_name
        quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_per_ip=config.max_connections_per_ip,
            exempt_listeners={control} if control else (),
            on_refused=services.on_closed,
        )
        bound: dict[str, int] = {}
        for endpoint in config.listeners:
            name = endpoint.listener_name
            listener = self._listener(name, name == control, services, quotas)
            bound[name] = await listener.start(endpoint.host, endpoint.port)
            self.listeners[name] = listener
        return bound

    def _listener(
        self, name: str, control: bool, services: ListenerServices, quotas: ConnectionQuotas
    ) -> Listener:
        config = self.config
        return Listener(
            name,
            self.control if control and self.control is not None else self.data,
            accepts=CONTROL_LISTENER_APIS if control else None,
            unsupported=services.unsupported,
            max_frame_size=config.socket_request_max_bytes,
            on_sent=services.on_sent,
            priority=self.priority if control else None,
            max_waiting=1 if control else DATA_PLANE_MAX_WAITING,
            quotas=quotas,
            idle_s=config.connections_max_idle_ms / 1000,
            on_closed=services.on_closed,
            security=config.listener_security.get(name),
            credentials=services.credentials,
            api_versions=services.api_versions,
            dialect=config.control_wire.dialect,
        )

    def start_handlers(self) -> None:
        """Start the handler threads: requests queued until now are handled from here on."""
        self.data.start()
        if self.control is not None:
            self.control.start()

    async def close_listeners(self) -> None:
        for listener in self.listeners.values():
            await listener.close()

    async def stop_handlers(self) -> None:
        """Let the threads finish what is queued, then end them."""
        await self.data.stop()
        if self.control is not None:
            await self.control.stop()
        if self.priority is not None:
            self.priority.close()
