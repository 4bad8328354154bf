"""A broker listener: the shared connection front-end feeding one plane's RequestChannel.

The front-end (``network/frontend.py``) admits, authenticates and reads connections, decodes headers
and answers UNSUPPORTED_VERSION and INVALID_REQUEST itself. What a broker adds is KIP-291's: each
request goes to its plane's queue (waiting while it is full, so a busy plane stops reading rather
than dropping), a control-plane listener announces its requests to ``ControlPriority``, and a data
connection may have up to ``max_waiting`` answers outstanding.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Collection

from broker.control_priority import ControlConnection, ControlPriority
from broker.request_channel import Request, RequestChannel, Result
from network.connection_quotas import ConnectionQuotas
from network.frontend import ConnectionWatch, FrontEnd, IncomingRequest
from network.handshake import CredentialLookup
from protocol import DEFAULT_DIALECT, RequestHeader, UnsupportedVersionError, WireDialect
from security.config import ListenerSecurity

__all__ = ["Listener"]

log = logging.getLogger("broker.network")


class _Queued:
    """A request in a plane: its answer once a handler settles it; ``on_sent`` once it is written."""

    __slots__ = ("on_sent", "request")

    def __init__(self, request: Request, on_sent: Callable[[Request], None] | None) -> None:
        self.request = request
        self.on_sent = on_sent

    def answer(self) -> asyncio.Future[Result]:
        return self.request.future

    def written(self) -> None:
        if self.on_sent is not None:
            self.on_sent(self.request)


class Listener:
    """One TCP listener feeding a RequestChannel.

    ``accepts`` says which API keys this listener serves (None: all); another known API is answered
    INVALID_REQUEST without being queued (a data-plane API on the control-plane listener).
    ``unsupported`` answers an API version this broker does not implement; ``api_versions`` the
    ApiVersions a SASL client sends before it has authenticated.
    """

    def __init__(
        self,
        name: str,
        channel: RequestChannel,
        *,
        accepts: Collection[int] | None,
        unsupported: Callable[[UnsupportedVersionError], bytes],
        max_frame_size: int,
        on_sent: Callable[[Request], None] | None = None,
        priority: ControlPriority | None = None,
        max_waiting: int = 1,
        quotas: ConnectionQuotas | None = None,
        idle_s: float | None = None,
        on_closed: Callable[[str, str], None] | None = None,
        security: ListenerSecurity | None = None,
        credentials: CredentialLookup | None = None,
        api_versions: Callable[[RequestHeader], bytes] | None = None,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> None:
        """``on_sent`` is called once a response is written: the request's total time ends there, as
        in Kafka. ``priority``, for the control-plane listener, announces each request from its first
        byte to its answer. ``max_waiting`` is the answers a connection may have outstanding: 1 is
        Kafka's muted channel; more lets a client pipeline requests that wait in a purgatory
        (acks=all), each still handled only after the previous one was, so appends keep their order.
        ``dialect`` is the wire dialect of ``inter.broker.protocol.version``: headers are read in it."""
        self.name = name
        self.channel = channel
        self.on_sent = on_sent
        self.priority = priority
        watch: Callable[[], ConnectionWatch] | None = None
        if priority is not None:
            watch = functools.partial(ControlConnection, priority)
        self.frontend = FrontEnd(
            name,
            self._dispatch,
            api_keys=accepts,
            max_frame_size=max_frame_size,
            max_waiting=max_waiting,
            unsupported=unsupported,
            quotas=quotas,
            idle_s=idle_s,
            on_closed=on_closed,
            security=security,
            credentials=credentials,
            api_versions=api_versions,
            watch=watch,
            logger=log,
            label=f"listener {name}",
            dialect=dialect,
        )
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self.port = await self.frontend.start(host, port)
        log.info("listener %s on %s:%d (%s queue)", self.name, host or "*", self.port, self.channel.name)
        return self.port

    async def close(self) -> None:
        await self.frontend.close()

    async def _dispatch(self, incoming: IncomingRequest) -> _Queued:
        """Queue the request in this listener's plane; return once a handler has taken it and
        returned, so a connection's requests are handled in order (its answer may come later)."""
        loop = asyncio.get_running_loop()
        request = Request(
            incoming.header,
            incoming.frame,
            incoming.body_offset,
            incoming.listener,
            incoming.peer,
            incoming.received_at,
            loop.create_future(),
            loop.create_future(),
            principal=incoming.principal,
        )
        await self.channel.submit(request)
        assert request.handled is not None
        await request.handled
        return _Queued(request, self.on_sent)
