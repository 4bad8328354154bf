"""An asyncio server for Kafka-protocol requests: framing, decoding and error answers, written once.

The controller's RPC listener and the simulated brokers differ only in what they do with a decoded
request, so that is the one thing they pass in: a handler coroutine. Like a Kafka processor, each
connection is muted while its request is handled, so responses leave in request order and a peer
that pipelines simply waits in the socket buffer.

A peer that breaks the wire format (bad size prefix, unknown API key, malformed body) loses its own
connection and nothing else. Refusals that Kafka answers in-band get a schema-valid error body:
UNSUPPORTED_VERSION (35) for a known API at a version the codec lacks, INVALID_REQUEST (42) for an
API this listener does not serve (the handler is never called for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from daemon.frames import StreamEnded, read_frame
from network.connection_quotas import ConnectionQuotas
from network.handshake import HANDSHAKE_TIMEOUT_S, AuthenticationFailed, CredentialLookup, authenticate
from protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    SUPPORTED_VERSIONS,
    ErrorCode,
    FrameTooLarge,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request_header,
    encode_response,
    error_response_body,
    message_codec,
)
from security.config import ListenerSecurity
from security.principal import ANONYMOUS

__all__ = ["RequestContext", "RequestHandler", "RequestServer", "current_request"]

log = logging.getLogger("network.server")

RequestHandler = Callable[[RequestHeader, dict[str, Any]], Awaitable[dict[str, Any]]]

_READ_LIMIT = 1 << 20
"""StreamReader buffer high-water mark: large enough that a big control request is read in few pauses."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the server knows about the request being handled, beyond its header and body."""

    peer: str
    size: int
    """Bytes of the whole frame, size prefix included."""
    received_at: float
    """Loop time at which the last byte of the frame had been read."""
    principal: str = ANONYMOUS
    """The connection's authenticated principal."""

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0].strip("[]")


current_request: ContextVar[RequestContext] = ContextVar("current_request")
"""Set by the server for the duration of each handler call (each connection is its own task)."""


class _CloseConnection(Exception):
    """The peer broke the protocol: drop its connection, keep serving the others."""


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


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
    ) -> None:
        unknown = sorted(int(key) for key in api_keys if key not in SUPPORTED_VERSIONS)
        if unknown:
            raise ValueError(f"{name}: the codec implements no API with key(s) {unknown}")
        self.handler = handler
        self.name = name
        self.api_keys = frozenset(int(key) for key in api_keys)
        self.max_frame_size = max_frame_size
        self.quotas = quotas
        self.idle_s = idle_s
        """``connections.max.idle.ms``: a connection that sends no request (or not all of one) for
        this long is closed."""
        self.on_closed = on_closed
        """Called with (server name, reason) when an idle connection is closed."""
        self.security = security
        """TLS and SASL on this listener; None or PLAINTEXT: every peer is ``User:ANONYMOUS``."""
        self.credentials = credentials
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- lifecycle

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (port 0 picks a free one) and return the bound port."""
        if self._server is not None:
            raise RuntimeError(f"{self.name}: already started")
        tls = self.security.tls if self.security is not None else None
        self._server = await asyncio.start_server(
            self._serve,
            host,
            port,
            limit=_READ_LIMIT,
            ssl=tls,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if tls is not None else None,
        )
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("%s: listening on %s:%d", self.name, host, self._port)
        return self._port

    async def close(self) -> None:
        """Stop accepting, then close every connection (cancelling any request being handled)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.name}: not started")
        return self._port

    @property
    def connections(self) -> int:
        """Connections currently open."""
        return len(self._connections)

    # -- one connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = _peer_name(writer)
        if self._closing:
            writer.close()
            return
        ip = peer.rsplit(":", 1)[0]
        refused = self.quotas.admit(self.name, ip) if self.quotas is not None else None
        if refused is not None:
            log.warning("%s: closing connection from %s: %s", self.name, peer, refused)
            writer.close()
            return
        self._connections.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            principal = await self._authenticate(reader, writer)
            while (frame := await self._next_frame(reader)) is not None:
                response = await self._answer(frame, peer, principal)
                writer.write(response)
                await writer.drain()
        except _CloseConnection as exc:
            log.warning("%s: closing connection from %s: %s", self.name, peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("%s: connection from %s lost: %r", self.name, peer, exc)
        except asyncio.CancelledError:
            pass  # closing the server: ending quietly keeps asyncio from logging the cancelled task
        finally:
            self._connections.discard(task)
            if self.quotas is not None:
                self.quotas.release(self.name, ip)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """The peer's principal; _CloseConnection when TLS or SASL fails (or takes too long)."""
        try:
            return await authenticate(
                reader,
                writer,
                self.security,
                credentials=self.credentials,
                api_versions=self._no_api_versions,
                unsupported=self._unsupported,
                timeout_s=self.idle_s,
            )
        except AuthenticationFailed as exc:
            if self.on_closed is not None:
                self.on_closed(self.name, f"authentication_{exc.kind}")
            raise _CloseConnection(exc.reason) from None

    @staticmethod
    def _no_api_versions(header: RequestHeader) -> bytes:
        raise AuthenticationFailed("ApiVersions before authentication is not answered here", "illegal_state")

    def _unsupported(self, exc: UnsupportedVersionError) -> bytes:
        lowest = min(SUPPORTED_VERSIONS[exc.api_key])
        body = error_response_body(exc.api_key, lowest, ErrorCode.UNSUPPORTED_VERSION)
        return encode_response(exc.api_key, lowest, exc.correlation_id, body)

    async def _next_frame(self, reader: asyncio.StreamReader) -> bytes | None:
        """The next request frame; None at a clean end; _CloseConnection when it is too large or does
        not come within ``connections.max.idle.ms``."""
        try:
            async with asyncio.timeout(self.idle_s):
                return await read_frame(reader, self.max_frame_size)
        except TimeoutError:
            if self.on_closed is not None:
                self.on_closed(self.name, "idle")
            raise _CloseConnection(
                f"idle for more than {self.idle_s:g} s (connections.max.idle.ms)"
            ) from None
        except StreamEnded:
            return None
        except FrameTooLarge as exc:
            raise _CloseConnection(str(exc)) from None

    async def _answer(self, frame: bytes, peer: str, principal: str) -> bytes:
        """The response frame to one request frame; raises _CloseConnection where Kafka would close."""
        received_at = asyncio.get_running_loop().time()
        try:
            header, offset = decode_request_header(frame, self.max_frame_size)
        except UnsupportedVersionError as exc:
            log.info("%s: %s from %s; answering UNSUPPORTED_VERSION", self.name, exc, peer)
            return self._unsupported(exc)
        except ProtocolError as exc:
            raise _CloseConnection(str(exc)) from None
        key, version = header.api_key, header.api_version
        if key not in self.api_keys:
            log.warning(
                "%s: API key %d (correlation id %d) from %s is not served on this listener",
                self.name,
                key,
                header.correlation_id,
                peer,
            )
            body = error_response_body(key, version, ErrorCode.INVALID_REQUEST)
            return encode_response(key, version, header.correlation_id, body)
        try:
            body = message_codec(key, version, "request").decode(frame, offset)
        except ProtocolError as exc:
            raise _CloseConnection(str(exc)) from None
        context = RequestContext(peer=peer, size=len(frame), received_at=received_at, principal=principal)
        current_request.set(context)
        try:
            response = await self.handler(header, body)
            return encode_response(key, version, header.correlation_id, response)
        except Exception as exc:
            log.exception(
                "%s: handling API key %d v%d (correlation id %d) from %s failed",
                self.name,
                key,
                version,
                header.correlation_id,
                peer,
            )
            raise _CloseConnection(f"handler failed: {exc!r}") from exc
