"""A Kafka-protocol server whose requests are handled by one coroutine: the shared front-end plus
body decoding and response encoding.

The controller's RPC listener and the simulated brokers differ only in what they do with a decoded
request, so that is the one thing they pass in: a handler coroutine. Everything else (quotas,
authentication, framing, UNSUPPORTED_VERSION and INVALID_REQUEST answers) is the front-end's
(``network/frontend.py``). Like a Kafka processor, each connection is muted while its request is
handled, so responses leave in request order and a peer that pipelines simply waits in the socket
buffer. A malformed body or a failing handler closes that connection and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from network.connection_quotas import ConnectionQuotas
from network.frontend import Close, FrontEnd, IncomingRequest, Ready
from network.handshake import CredentialLookup
from protocol import DEFAULT_MAX_FRAME_SIZE, ProtocolError, RequestHeader, encode_response, message_codec
from security.config import ListenerSecurity
from security.principal import ANONYMOUS

__all__ = ["CloseConnection", "RequestContext", "RequestHandler", "RequestServer", "current_request"]

log = logging.getLogger("network.server")

RequestHandler = Callable[[RequestHeader, dict[str, Any]], Awaitable[dict[str, Any]]]


class CloseConnection(Exception):
    """Raised by a handler that answers a request by closing its connection (logged with the reason, as
    Kafka closes a connection it will not serve)."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the server knows about the request being handled, beyond its header and body."""

    peer: str
    size: int
    """Bytes of the whole frame, size prefix included."""
    received_at: float
    """Loop time at which the request was handed to the handler."""
    principal: str = ANONYMOUS
    """The connection's authenticated principal."""

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0].strip("[]")


current_request: ContextVar[RequestContext] = ContextVar("current_request")
"""Set by the server for the duration of each handler call (each connection reads in its own task)."""


class RequestServer:
    """Serves Kafka requests for the API keys in ``api_keys`` on one TCP listener."""

    def __init__(
        self,
        handler: RequestHandler,
        *,
        name: str,
        api_keys: Collection[int],
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        quotas: ConnectionQuotas | None = None,
        idle_s: float | None = None,
        on_closed: Callable[[str, str], None] | None = None,
        security: ListenerSecurity | None = None,
        credentials: CredentialLookup | None = None,
        api_versions: Callable[[RequestHeader], bytes] | None = None,
    ) -> None:
        """``idle_s`` is ``connections.max.idle.ms``; ``on_closed`` is called with (server name,
        reason) when an idle or unauthenticated connection is closed; ``security`` None or PLAINTEXT
        makes every peer ``User:ANONYMOUS``. ApiVersions is answered before SASL authentication only
        with ``api_versions`` (the whole response frame for a request header)."""
        self.handler = handler
        self.name = name
        self.frontend = FrontEnd(
            name,
            self._dispatch,
            api_keys=api_keys,
            max_frame_size=max_frame_size,
            quotas=quotas,
            idle_s=idle_s,
            on_closed=on_closed,
            security=security,
            credentials=credentials,
            api_versions=api_versions,
            logger=log,
        )

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (port 0 picks a free one) and return the bound port."""
        bound = await self.frontend.start(host, port)
        log.info("%s: listening on %s:%d", self.name, host, bound)
        return bound

    async def close(self) -> None:
        """Stop accepting, then close every connection (cancelling any request being handled)."""
        await self.frontend.close()

    @property
    def port(self) -> int:
        return self.frontend.port

    @property
    def connections(self) -> int:
        """Connections currently open."""
        return self.frontend.connections

    async def _dispatch(self, request: IncomingRequest) -> Ready:
        """Decode the body, call the handler and encode its answer; Close where Kafka would close."""
        received_at = asyncio.get_running_loop().time()
        header = request.header
        key, version = header.api_key, header.api_version
        try:
            body = message_codec(key, version, "request").decode(request.frame, request.body_offset)
        except ProtocolError as exc:
            return Ready(Close(str(exc)))
        current_request.set(RequestContext(request.peer, len(request.frame), received_at, request.principal))
        try:
            response = await self.handler(header, body)
            return Ready(encode_response(key, version, header.correlation_id, response))
        except CloseConnection as exc:
            return Ready(Close(str(exc)))
        except Exception as exc:
            log.exception(
                "%s: handling API key %d v%d (correlation id %d) from %s failed",
                self.name,
                key,
                version,
                header.correlation_id,
                request.peer,
            )
            return Ready(Close(f"handler failed: {exc!r}"))
