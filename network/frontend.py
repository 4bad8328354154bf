"""The one connection front-end every listener runs: accept, admit, authenticate, read, decode headers.

The controller's RPC listener, every broker listener and the tests' simulated brokers differ only in
what they do with a request once its header is decoded, so that is what they pass in: a ``Dispatch``
coroutine. Everything before it is written once here, as Kafka's SocketServer processors do it:

* connection quotas (``max.connections``, ``max.connections.per.ip``) and TCP_NODELAY;
* authentication: TLS by the transport, then the SASL exchange (``network/handshake.py``);
* frames read with ``connections.max.idle.ms`` as the idle timeout, and ``socket.request.max.bytes``;
* headers decoded; an API version the codec lacks is answered UNSUPPORTED_VERSION and an API this
  listener does not serve INVALID_REQUEST, in-band, without reaching the dispatcher.

A peer that breaks the wire format (a bad size prefix, an unknown API key, a malformed header) loses
its own connection and nothing else. Each connection runs two tasks: one reads requests and hands
them to the dispatcher, one writes their answers in request order. With ``max_waiting`` 1 (Kafka's
muted channel) the next request is read only once the previous answer is written; more lets a client
pipeline requests whose answers wait (acks=all produces), each still dispatched only after the
previous one was handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from daemon.frames import StreamEnded, TruncatedFrame, read_frame
from network.connection_quotas import ConnectionQuotas
from network.handshake import HANDSHAKE_TIMEOUT_S, AuthenticationFailed, CredentialLookup, authenticate
from protocol import (
    DEFAULT_DIALECT,
    DEFAULT_MAX_FRAME_SIZE,
    SUPPORTED_VERSIONS,
    ErrorCode,
    FrameTooLarge,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    WireDialect,
    decode_request_header,
    encode_response,
    error_response_body,
)
from security.config import ListenerSecurity

__all__ = [
    "Answer",
    "Close",
    "ConnectionWatch",
    "Dispatch",
    "FrontEnd",
    "IncomingRequest",
    "Ready",
    "Reply",
    "unsupported_version_answer",
]

_log = logging.getLogger("network.frontend")

READ_LIMIT = 1 << 20
"""StreamReader buffer high-water mark: large enough that a big control request is read in few pauses."""


@dataclass(frozen=True, slots=True)
class Close:
    """A verdict that the connection must be closed, with the reason to log."""

    reason: str


Answer = bytes | None | Close
"""A response frame, no response at all (an acks=0 produce), or Close."""


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    """A request whose header the front-end decoded; the body is left to the dispatcher."""

    header: RequestHeader
    frame: bytes
    """The whole frame, size prefix included."""
    body_offset: int
    listener: str
    peer: str
    """``host:port`` (``[host]:port`` for IPv6)."""
    principal: str
    """The connection's authenticated principal (``User:ANONYMOUS`` on PLAINTEXT)."""
    received_at: float
    """``time.monotonic()`` once the whole frame had been read."""


class Reply(Protocol):
    """A request the dispatcher took: its answer, written in request order once it is ready."""

    def answer(self) -> Awaitable[Answer]:
        """The answer, once ready."""
        ...

    def written(self) -> None:
        """Called once the answer is written (or dropped, for None)."""
        ...


class Ready:
    """A reply known at once (in-band refusals, answers of a handler already awaited)."""

    __slots__ = ("_answer",)

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    async def answer(self) -> Answer:
        return self._answer

    def written(self) -> None:
        pass


Dispatch = Callable[[IncomingRequest], Awaitable[Reply]]
"""Takes one request; returns once the connection's next request may be handled (this one has been),
with its reply. While it waits the connection reads nothing more: back-pressure."""


class ConnectionWatch(Protocol):
    """Per-connection observer, made for each accepted connection (the broker's control plane uses
    one to announce pending control work from a request's first byte to its answer)."""

    @property
    def reader(self) -> asyncio.StreamReader:
        """The stream reader the connection's transport feeds."""
        ...

    def authenticated(self, sock: socket.socket | None) -> None:
        """The connection is past authentication and about to read requests."""
        ...

    def answered(self) -> None:
        """Every answer read so far is written."""
        ...

    def closed(self) -> None:
        """The connection is closing (after a refusal, a failed authentication or its last answer)."""
        ...


def unsupported_version_answer(exc: UnsupportedVersionError) -> bytes:
    """UNSUPPORTED_VERSION in the API's oldest layout, as Kafka answers a version it lacks."""
    lowest = min(SUPPORTED_VERSIONS[exc.api_key])
    body = error_response_body(exc.api_key, lowest, ErrorCode.UNSUPPORTED_VERSION)
    return encode_response(exc.api_key, lowest, exc.correlation_id, body)


@dataclass(frozen=True, slots=True)
class _End:
    """The reading side stopped; a non-empty reason is logged."""

    reason: str


def _peer(writer: asyncio.StreamWriter) -> tuple[str, str]:
    """The connection's peer as ``host:port`` (``[host]:port`` for IPv6), and its host."""
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = str(peer[0]), peer[1]
        return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), host
    return str(peer), str(peer)


def _no_delay(writer: asyncio.StreamWriter) -> socket.socket | None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class FrontEnd:
    """One TCP listener: connections admitted, authenticated and read, each request handed to
    ``dispatch``, answers written in order.

    ``api_keys`` says which APIs this listener serves (None: every API; the dispatcher refuses what it
    does not know). ``unsupported`` answers an API version the codec lacks. ``on_closed`` is called
    with (listener, reason) when the front-end closes a connection that idled or failed to
    authenticate; ``watch`` makes a ConnectionWatch for each connection. Log lines go to ``logger``,
    naming the listener ``label``. ``dialect`` is the wire dialect headers are read in.
    """

    def __init__(
        self,
        name: str,
        dispatch: Dispatch,
        *,
        api_keys: Collection[int] | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_waiting: int = 1,
        unsupported: Callable[[UnsupportedVersionError], bytes] = unsupported_version_answer,
        quotas: ConnectionQuotas | None = None,
        idle_s: float | None = None,
        on_closed: Callable[[str, str], None] | None = None,
        security: ListenerSecurity | None = None,
        credentials: CredentialLookup | None = None,
        api_versions: Callable[[RequestHeader], bytes] | None = None,
        watch: Callable[[], ConnectionWatch] | None = None,
        logger: logging.Logger = _log,
        label: str | None = None,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> None:
        if api_keys is not None:
            unknown = sorted(int(key) for key in api_keys if key not in SUPPORTED_VERSIONS)
            if unknown:
                raise ValueError(f"{name}: the codec implements no API with key(s) {unknown}")
        self.name = name
        self.dispatch = dispatch
        self.api_keys = None if api_keys is None else frozenset(int(key) for key in api_keys)
        self.max_frame_size = max_frame_size
        self.max_waiting = max_waiting
        self.unsupported = unsupported
        self.quotas = quotas
        self.idle_s = idle_s
        """``connections.max.idle.ms``: a connection that sends nothing (or not the rest of a frame)
        for this long is closed, so a stalled peer holds no more than its socket."""
        self.on_closed = on_closed
        self.security = security
        """TLS and SASL on this listener; None or PLAINTEXT: every peer is ``User:ANONYMOUS``."""
        self.credentials = credentials
        """SCRAM credentials by (user, mechanism), for SASL listeners."""
        self.api_versions = api_versions
        """The ApiVersions answer given before a SASL client has authenticated (None: not answered)."""
        self.watch = watch
        self.dialect = dialect
        """Which layout a control-plane version number names in this listener's headers (``WireDialect``):
        StopReplica v4's header is flexible in the KAFKA dialect only."""
        self.log = logger
        self.label = label or name
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- lifecycle

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (an empty host: every interface; port 0 picks a free one) and return
        the bound port."""
        if self._server is not None:
            raise RuntimeError(f"{self.name}: already started")
        tls = self.security.tls if self.security is not None else None
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            host or None,
            port,
            ssl=tls,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if tls is not None else None,
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self._port

    async def close(self) -> None:
        """Stop accepting, then close every connection (cancelling any request being dispatched)."""
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

    def _protocol(self) -> asyncio.StreamReaderProtocol:
        watch = self.watch() if self.watch is not None else None
        reader = watch.reader if watch is not None else asyncio.StreamReader(limit=READ_LIMIT)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(reader, writer, watch)

        return asyncio.StreamReaderProtocol(reader, serve)

    # -- one connection

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, watch: ConnectionWatch | None
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer, host = _peer(writer)
        if not self._admit(peer, host):
            if watch is not None:
                watch.closed()
            writer.close()
            return
        self._connections.add(task)
        try:
            sock = _no_delay(writer)
            principal = await self._authenticate(reader, writer, peer)
            if principal is not None:
                if watch is not None:
                    watch.authenticated(sock)
                await self._converse(reader, writer, peer, principal, watch)
        except asyncio.CancelledError:
            pass  # the listener is closing; a quiet end keeps asyncio from logging the cancelled task
        finally:
            self._connections.discard(task)
            if self.quotas is not None:
                self.quotas.release(self.name, host)
            if watch is not None:
                watch.closed()
            writer.close()

    def _admit(self, peer: str, host: str) -> bool:
        """Count a new connection against the quotas; False (logged) when it must be closed."""
        if self._closing:
            return False
        refused = self.quotas.admit(self.name, host) if self.quotas is not None else None
        if refused is not None:
            self._log_closing(peer, refused)
        return refused is None

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> str | None:
        """The connection's principal; None once a failed authentication was logged and counted."""
        try:
            return await authenticate(
                reader,
                writer,
                self.security,
                credentials=self.credentials,
                api_versions=self.api_versions,
                unsupported=self.unsupported,
                timeout_s=self.idle_s,
            )
        except AuthenticationFailed as exc:
            kind, reason = exc.kind, exc.reason
        except ConnectionError as exc:
            kind, reason = "idle", f"not authenticated: {exc!r}"
        self.log.warning("%s: closing connection from %s: %s", self.label, peer, reason)
        if self.on_closed is not None:
            self.on_closed(self.name, f"authentication_{kind}")
        return None

    async def _converse(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
        principal: str,
        watch: ConnectionWatch | None,
    ) -> None:
        outbox: asyncio.Queue[Reply | _End] = asyncio.Queue()
        room = asyncio.Semaphore(self.max_waiting)
        reading = asyncio.create_task(self._read_requests(reader, outbox, room, peer, principal))
        answering = asyncio.create_task(self._write_answers(outbox, writer, room, peer, watch))
        try:
            await asyncio.wait((reading, answering), return_when=asyncio.FIRST_COMPLETED)
            if not answering.done():
                await answering  # the reading side ended: earlier answers still go out, in order
        finally:
            for side in (reading, answering):
                side.cancel()
            await asyncio.gather(reading, answering, return_exceptions=True)

    async def _read_requests(
        self,
        reader: asyncio.StreamReader,
        outbox: asyncio.Queue[Reply | _End],
        room: asyncio.Semaphore,
        peer: str,
        principal: str,
    ) -> None:
        reason: str | None = None
        try:
            while reason is None:
                await room.acquire()
                reason = await self._one_request(reader, outbox, peer, principal)
        except (ConnectionError, asyncio.IncompleteReadError):
            reason = ""
        except Exception as exc:  # a bug must close the connection, never leave a request unanswered
            self.log.exception("%s: error reading a request from %s", self.label, peer)
            reason = f"internal error reading a request: {exc!r}"
        outbox.put_nowait(_End(reason))

    async def _write_answers(
        self,
        outbox: asyncio.Queue[Reply | _End],
        writer: asyncio.StreamWriter,
        room: asyncio.Semaphore,
        peer: str,
        watch: ConnectionWatch | None,
    ) -> None:
        """Write the connection's answers in request order; a Close (or the end) stops the connection."""
        while True:
            reply = await outbox.get()
            if isinstance(reply, _End):
                self._log_closing(peer, reply.reason)
                return
            result = await reply.answer()
            if isinstance(result, Close):
                self._log_closing(peer, result.reason)
                return
            if result is not None:
                try:
                    writer.write(result)
                    await writer.drain()
                except ConnectionError:
                    return
            reply.written()
            room.release()
            if watch is not None and outbox.empty():
                watch.answered()

    async def _one_request(
        self, reader: asyncio.StreamReader, outbox: asyncio.Queue[Reply | _End], peer: str, principal: str
    ) -> str | None:
        """Read one request and queue its reply; a string (empty at a clean end) ends the connection."""
        try:
            async with asyncio.timeout(self.idle_s):  # no task per read, unlike wait_for
                frame = await read_frame(reader, self.max_frame_size)
        except TimeoutError:
            if self.on_closed is not None:
                self.on_closed(self.name, "idle")
            return f"idle for more than {self.idle_s:g} s (connections.max.idle.ms)"
        except StreamEnded:
            return ""
        except (TruncatedFrame, FrameTooLarge) as exc:
            return str(exc)
        received = time.monotonic()
        try:
            header, offset = decode_request_header(frame, self.max_frame_size, dialect=self.dialect)
        except UnsupportedVersionError as exc:
            self.log.debug("%s: %s from %s; answering UNSUPPORTED_VERSION", self.label, exc, peer)
            outbox.put_nowait(Ready(self.unsupported(exc)))
            return None
        except ProtocolError as exc:
            return f"malformed request: {exc}"
        if self.api_keys is not None and header.api_key not in self.api_keys:
            outbox.put_nowait(Ready(self._not_served(header, peer)))
            return None
        request = IncomingRequest(header, frame, offset, self.name, peer, principal, received)
        outbox.put_nowait(await self.dispatch(request))
        return None

    def _log_closing(self, peer: str, reason: str) -> None:
        if reason:  # an empty reason: the peer closed the connection
            self.log.warning("%s: closing connection from %s: %s", self.label, peer, reason)

    def _not_served(self, header: RequestHeader, peer: str) -> bytes:
        """INVALID_REQUEST, as Kafka answers an API its listener does not serve."""
        key, version = header.api_key, header.api_version
        self.log.warning(
            "%s: API key %d (correlation id %d) from %s is not served on this listener",
            self.label,
            key,
            header.correlation_id,
            peer,
        )
        body = error_response_body(key, version, ErrorCode.INVALID_REQUEST, dialect=self.dialect)
        return encode_response(key, version, header.correlation_id, body, dialect=self.dialect)
