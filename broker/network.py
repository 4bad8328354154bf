"""The broker's network planes: listeners feeding bounded request queues drained by handler threads.

Kafka's shape (SocketServer, RequestChannel, KafkaRequestHandlerPool), on one asyncio loop for the
sockets and OS threads for the handlers:

* a connection has at most one request in the queue or being handled, so its requests are handled
  in order, and its answers go back in order. Kafka also keeps the connection muted while an answer
  waits in a purgatory; here a data-plane connection may have up to ``max_waiting`` answers
  outstanding, so a client pipelining acks=all produces is not held to one replication round trip
  per request (the control plane keeps Kafka's rule);
* a full queue stops the connections that feed it from reading: back-pressure, nothing dropped;
* each plane has its own queue and threads, so a flooded data plane cannot delay the control plane
  (KIP-291): the control plane is one queue of 20 and one thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import functools
import logging
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from daemon.frames import StreamEnded, TruncatedFrame, read_frame
from network.connection_quotas import ConnectionQuotas
from network.handshake import HANDSHAKE_TIMEOUT_S, AuthenticationFailed, CredentialLookup, authenticate
from protocol import (
    FrameTooLarge,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request_header,
)
from security.config import ListenerSecurity
from security.principal import ANONYMOUS

log = logging.getLogger("broker.network")

_READ_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class Close:
    """A handler's verdict that the connection must be closed, with the reason to log."""

    reason: str


Result = bytes | None | Close
"""A response frame, no response at all (acks=0 produce), or Close."""
Outcome = Result | Future[Result]
"""What a handler returns: a result now, or a future one (a request waiting in a purgatory)."""


@dataclass(slots=True, eq=False)
class Request:
    header: RequestHeader
    frame: bytes
    body_offset: int
    listener: str
    peer: str
    received_at: float
    """``time.monotonic()`` when the whole frame had been read."""
    future: asyncio.Future[Result] = field(repr=False)
    handled: asyncio.Future[None] | None = field(default=None, repr=False)
    """Set once a handler has returned, even if the answer waits on (a purgatory) for longer."""
    dequeued_at: float = 0.0
    handled_at: float = 0.0
    own_epoch: int = -1
    """Control requests: this broker's epoch when the request was judged, read once so that the
    decision and its event-log line agree even if a re-registration happens meanwhile."""
    principal: str = ANONYMOUS
    """Who sent it: the connection's authenticated principal (``User:ANONYMOUS`` on PLAINTEXT)."""
    finish: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, repr=False)
    """Adjusts the handler's answer before it is encoded (refused topics added, unauthorized ones
    left out)."""
    describable: Callable[[str], bool] | None = field(default=None, repr=False)
    """Which resources a listing may name (None: all); for a handler that encodes entries as it builds
    them (Metadata for all topics), so that what may not be described is never built."""

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0].strip("[]")


def _ready_probe(poller: select.epoll) -> Callable[[], bool]:
    """``poller`` has a ready descriptor: a zero-timeout ``epoll_wait`` that keeps the GIL.

    ``select.epoll.poll`` releases the GIL around the call, and a thread that releases and retakes
    it every few hundred microseconds resets every other thread's switch request: the event loop
    would starve while the data plane merely checks whether the control plane needs it. Called
    through ``ctypes.PyDLL``, which keeps the GIL; a zero timeout never blocks.
    """
    try:
        epoll_wait = ctypes.PyDLL(None).epoll_wait
    except (OSError, AttributeError):  # not Linux/glibc: the releasing call still works
        return lambda: bool(poller.poll(0, 1))
    epoll_wait.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
    epoll_wait.restype = ctypes.c_int
    events = ctypes.create_string_buffer(64)  # room for one struct epoll_event; never read
    fd = poller.fileno()
    return lambda: epoll_wait(fd, events, 1, 0) > 0


class ControlPriority:
    """Lets control requests run ahead of data-plane work inside one interpreter.

    Threads share one GIL, so CPU-bound data-plane handlers slow every step of a control request
    (reading it, handling it, writing the answer) however separate the queues are. Data-plane
    handlers therefore block at their checkpoints (before each request, and between the topics of
    a Metadata response) while control work is pending: from the moment a control request's bytes
    wait in the kernel (seen with a zero-timeout epoll on the control connections, so the control
    plane need not win the GIL first to announce itself) until its answer is written. Each pause is
    bounded, so the data plane is never starved.
    """

    MAX_PAUSE_S = 0.02

    def __init__(self) -> None:
        self._in_flight = 0
        """Connections with a request between its first byte and its answer; written only on the
        event loop, read by data-plane threads."""
        self._done = threading.Event()
        """Set, and replaced, each time the control plane has no request left in flight."""
        self._poller = select.epoll() if hasattr(select, "epoll") else None
        self._ready = _ready_probe(self._poller) if self._poller is not None else lambda: False
        self._watched = 0

    def begin(self) -> None:
        """On the event loop, when the first bytes of a control request arrive."""
        self._in_flight += 1

    def end(self) -> None:
        """On the event loop, once its answer is written: wakes the data plane."""
        self._in_flight -= 1
        if self._in_flight == 0:
            done, self._done = self._done, threading.Event()
            done.set()

    def watch(self, fd: int) -> None:
        """Count unread bytes on this control connection as control work waiting."""
        if self._poller is not None:
            self._poller.register(fd, select.EPOLLIN)
            self._watched += 1

    def unwatch(self, fd: int) -> None:
        if self._poller is not None:
            with contextlib.suppress(OSError, ValueError):
                self._poller.unregister(fd)
                self._watched -= 1

    def pending(self) -> bool:
        return bool(self._in_flight) or (self._watched > 0 and self._ready())

    def checkpoint(self) -> None:
        """Called by data-plane code: while control work is pending, block until the control plane
        has answered (or MAX_PAUSE_S has passed).

        A blocked thread does not compete for the GIL, so the event loop and the control handler
        get it at the next switch. Nothing here takes a lock the control path needs.
        """
        if self.pending():
            self._done.wait(self.MAX_PAUSE_S)

    def close(self) -> None:
        if self._poller is not None:
            self._poller.close()


class RequestChannel:
    """A bounded queue and the threads that handle what it holds."""

    def __init__(
        self,
        name: str,
        *,
        capacity: int,
        threads: int,
        thread_prefix: str,
        handle: Callable[[Request], Outcome],
        yield_to: ControlPriority | None = None,
    ) -> None:
        self.name = name
        self.capacity = capacity
        self._queue: queue.Queue[Request | None] = queue.Queue(maxsize=capacity)
        self._handle = handle
        self._yield_to = yield_to
        """For the data plane: the control plane it gives way to before each request."""
        self._threads = [
            threading.Thread(
                target=self._work, name=f"{thread_prefix}-kafka-request-handler-{i}", daemon=True
            )
            for i in range(threads)
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        """Connections waiting for a free slot, served first come, first served."""
        self._idle_lock = threading.Lock()
        self._idle_s = 0.0
        self._since = time.monotonic()
        self._waiting: dict[int, float] = {}
        """Thread ident -> when it started waiting for work (absent while it handles a request)."""

    @property
    def size(self) -> int:
        return self._queue.qsize()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._since = time.monotonic()
        for thread in self._threads:
            thread.start()

    async def stop(self) -> None:
        """Let the threads finish what is queued, then end them."""
        if self._loop is None:
            return  # never started
        loop = asyncio.get_running_loop()
        for _ in self._threads:
            await loop.run_in_executor(None, self._queue.put, None)
        for thread in self._threads:
            await loop.run_in_executor(None, thread.join, 10)

    async def submit(self, request: Request) -> None:
        """Queue ``request``, waiting (without reading more from its connection) while the queue is full.

        Waiters get freed slots in arrival order, and nobody overtakes them while they wait: a busy
        pipelining client must not starve the others (or a controller on a shared listener).
        """
        if not self._waiters:
            try:
                self._queue.put_nowait(request)
                return
            except queue.Full:
                pass
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiters.append(turn)
        try:
            while True:
                await turn
                try:
                    self._queue.put_nowait(request)
                    return
                except queue.Full:  # another slot will free up: keep our place at the front
                    again: asyncio.Future[None] = loop.create_future()
                    self._waiters[self._waiters.index(turn)] = again
                    turn = again
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(turn)
            self._slot_freed()  # pass on a wake-up this waiter may have consumed without using

    def _slot_freed(self) -> None:
        """On the loop, after a handler took a request: wake the first waiter not yet woken."""
        for waiter in self._waiters:
            if not waiter.done():
                if self._queue.full():
                    return
                waiter.set_result(None)
                return

    def idle_fraction(self) -> float:
        """Share of handler time spent waiting for work since the last call (Kafka's AvgIdlePercent)."""
        with self._idle_lock:
            now = time.monotonic()
            elapsed = (now - self._since) * len(self._threads)
            idle = self._idle_s + sum(now - since for since in self._waiting.values())
            self._idle_s, self._since = 0.0, now
            for ident in self._waiting:
                self._waiting[ident] = now
        return 1.0 if elapsed <= 0 else max(0.0, min(1.0, idle / elapsed))

    def _work(self) -> None:
        loop = self._loop
        assert loop is not None
        ident = threading.get_ident()
        while True:
            with self._idle_lock:
                self._waiting[ident] = time.monotonic()
            request = self._queue.get()
            with self._idle_lock:
                self._idle_s += time.monotonic() - self._waiting.pop(ident)
            if loop.is_closed():
                return
            loop.call_soon_threadsafe(self._slot_freed)
            if request is None:
                return
            if self._yield_to is not None:
                self._yield_to.checkpoint()
            request.dequeued_at = time.monotonic()
            try:
                result: Outcome = self._handle(request)
            except Exception as exc:  # a handler bug closes that connection, never the thread
                log.exception("%s: error handling %s from %s", self.name, request.header, request.peer)
                result = Close(f"internal error handling the request: {exc!r}")
            request.handled_at = time.monotonic()
            if request.handled is not None and not loop.is_closed():
                loop.call_soon_threadsafe(_settle, request.handled, None)
            if isinstance(result, Future):
                result.add_done_callback(functools.partial(_settle_later, loop, request.future))
            elif not loop.is_closed():
                loop.call_soon_threadsafe(_settle, request.future, result)


def _settle_later(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Result], done: Future[Result]
) -> None:
    """A waiting request completed (on any thread): answer it on the loop."""
    if not loop.is_closed():
        loop.call_soon_threadsafe(_settle, future, done.result())


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


class _ArrivalReader(asyncio.StreamReader):
    """A control connection's reader: control work counts from a request's first byte to its answer.

    The loop hands bytes to the reader (``feed_data``) well before the coroutine waiting on them runs
    again; announcing the request only once it is parsed would let data-plane threads take the GIL
    back in between.
    """

    def __init__(self, priority: ControlPriority) -> None:
        super().__init__(limit=_READ_LIMIT)
        self._priority = priority
        self._unread = 0
        self._active = False

    def feed_data(self, data: bytes) -> None:  # type: ignore[override]  # the loop feeds bytes
        super().feed_data(data)
        self._unread += len(data)
        if not self._active:
            self._active = True
            self._priority.begin()

    async def readexactly(self, n: int) -> bytes:
        data = await super().readexactly(n)
        self._unread -= len(data)
        return data

    def settle(self) -> None:
        """After an answer: the connection is idle again unless the next request has started."""
        if self._active and self._unread == 0:
            self._active = False
            self._priority.end()

    def release(self) -> None:
        """The connection is closing."""
        if self._active:
            self._active = False
            self._priority.end()


class Listener:
    """One TCP listener feeding a RequestChannel.

    ``accepts`` says which API keys this listener serves; another known API is answered with
    ``reject(header)`` without being queued (a data-plane API on the control-plane listener).
    ``unsupported`` answers an API version this broker does not implement.
    """

    def __init__(
        self,
        name: str,
        channel: RequestChannel,
        *,
        accepts: Collection[int] | None,
        reject: Callable[[RequestHeader], bytes],
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
    ) -> None:
        self.name = name
        self.security = security
        """TLS and SASL on this listener; None or PLAINTEXT: every connection is ``User:ANONYMOUS``."""
        self.credentials = credentials
        """SCRAM credentials by (user, mechanism), for SASL listeners."""
        self.api_versions = api_versions
        """The ApiVersions answer given before a SASL client has authenticated."""
        self.quotas = quotas
        self.idle_s = idle_s
        """``connections.max.idle.ms``: a connection that sends nothing (or not the rest of a frame)
        for this long is closed, so a stalled peer holds no more than its socket."""
        self.on_closed = on_closed
        """Called with (listener, reason) when the broker closes an idle connection."""
        self.max_waiting = max_waiting
        """Answers a connection may have outstanding. 1 is Kafka's muted channel: the next request is
        read once the previous answer is written. More lets a client pipeline requests that wait in a
        purgatory (acks=all): each is still handled only after the previous one was, so appends keep
        their order, and answers are written in request order."""
        self.channel = channel
        self.on_sent = on_sent
        """Called once a response is written: the request's total time ends there, as in Kafka."""
        self.priority = priority
        """For the control-plane listener: announces each request from its first byte to its answer."""
        self.accepts = None if accepts is None else frozenset(accepts)
        self.reject = reject
        self.unsupported = unsupported
        self.max_frame_size = max_frame_size
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        tls = self.security.tls if self.security is not None else None
        handshake_s = HANDSHAKE_TIMEOUT_S if tls is not None else None
        if self.priority is None:
            self._server = await asyncio.start_server(
                self._serve, host or None, port, limit=_READ_LIMIT, ssl=tls, ssl_handshake_timeout=handshake_s
            )
        else:
            priority = self.priority

            def protocol() -> asyncio.StreamReaderProtocol:
                return asyncio.StreamReaderProtocol(_ArrivalReader(priority), self._serve)

            self._server = await asyncio.get_running_loop().create_server(
                protocol, host or None, port, ssl=tls, ssl_handshake_timeout=handshake_s
            )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("listener %s on %s:%d (%s queue)", self.name, host or "*", self.port, self.channel.name)
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        sock, peer, ip = _accepted(writer)
        arrivals = reader if isinstance(reader, _ArrivalReader) else None
        principal = await self._admit(reader, writer, peer, ip)
        if arrivals is not None:
            arrivals.settle() if principal is not None else arrivals.release()
        if principal is None:
            self._connections.discard(task)
            return
        fd = sock.fileno() if sock is not None and self.priority is not None else -1
        if fd >= 0 and self.priority is not None:
            self.priority.watch(fd)
        outbox: asyncio.Queue[_Answer] = asyncio.Queue()
        room = asyncio.Semaphore(self.max_waiting)
        reading = asyncio.create_task(self._read_requests(reader, outbox, room, peer, principal))
        answering = asyncio.create_task(self._answer(outbox, writer, room, arrivals, peer))
        try:
            await asyncio.wait((reading, answering), return_when=asyncio.FIRST_COMPLETED)
            if not answering.done():
                await answering  # the reading side ended: earlier answers still go out, in order
        except asyncio.CancelledError:
            pass  # the listener is closing; a quiet end keeps asyncio from logging the cancelled task
        finally:
            for side in (reading, answering):
                side.cancel()
            await asyncio.gather(reading, answering, return_exceptions=True)
            self._connections.discard(task)
            if self.quotas is not None:
                self.quotas.release(self.name, ip)
            if fd >= 0 and self.priority is not None:
                self.priority.unwatch(fd)
            if arrivals is not None:
                arrivals.release()
            writer.close()

    async def _admit(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str, ip: str
    ) -> str | None:
        """The connection's principal; None once the quotas or a failed authentication closed it."""
        refused = self.quotas.admit(self.name, ip) if self.quotas is not None else None
        if refused is not None:
            log.warning("listener %s: closing connection from %s: %s", self.name, peer, refused)
            writer.close()
            return None
        return await self._authenticate(reader, writer, peer, ip)

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str, ip: str
    ) -> str | None:
        try:
            return await authenticate(
                reader,
                writer,
                self.security,
                credentials=self.credentials,
                api_versions=self._api_versions,
                unsupported=self.unsupported,
                timeout_s=self.idle_s,
            )
        except asyncio.CancelledError:  # the listener is closing
            if self.quotas is not None:
                self.quotas.release(self.name, ip)
            writer.close()
            return None
        except (AuthenticationFailed, ConnectionError) as exc:
            kind = exc.kind if isinstance(exc, AuthenticationFailed) else "idle"
            reason = exc.reason if isinstance(exc, AuthenticationFailed) else f"not authenticated: {exc!r}"
            log.warning("listener %s: closing connection from %s: %s", self.name, peer, reason)
            if self.on_closed is not None:
                self.on_closed(self.name, f"authentication_{kind}")
            if self.quotas is not None:
                self.quotas.release(self.name, ip)
            writer.close()
            return None

    def _api_versions(self, header: RequestHeader) -> bytes:
        if self.api_versions is None:
            raise AuthenticationFailed(
                "ApiVersions is not answered before authentication here", "illegal_state"
            )
        return self.api_versions(header)

    async def _read_requests(
        self,
        reader: asyncio.StreamReader,
        outbox: asyncio.Queue[_Answer],
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
        outbox.put_nowait(_Answer(close=reason))

    async def _answer(
        self,
        outbox: asyncio.Queue[_Answer],
        writer: asyncio.StreamWriter,
        room: asyncio.Semaphore,
        arrivals: _ArrivalReader | None,
        peer: str,
    ) -> None:
        """Write the connection's answers in request order; a Close (or an end) stops the connection."""
        while True:
            answer = await outbox.get()
            if answer.close is not None:
                if answer.close:
                    log.warning("listener %s: closing connection from %s: %s", self.name, peer, answer.close)
                return
            result = answer.data if answer.request is None else await answer.request.future
            if isinstance(result, Close):
                log.warning("listener %s: closing connection from %s: %s", self.name, peer, result.reason)
                return
            if result is not None:
                try:
                    writer.write(result)
                    await writer.drain()
                except ConnectionError:
                    return
            if answer.request is not None and self.on_sent is not None:
                self.on_sent(answer.request)
            room.release()
            if arrivals is not None and outbox.empty():
                arrivals.settle()

    async def _one_request(
        self, reader: asyncio.StreamReader, outbox: asyncio.Queue[_Answer], peer: str, principal: str
    ) -> str | None:
        """Read one request and queue its answer; a string (empty at a clean EOF) ends the connection."""
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
            header, offset = decode_request_header(frame, self.max_frame_size)
        except UnsupportedVersionError as exc:
            outbox.put_nowait(_Answer(data=self.unsupported(exc)))
            return None
        except ProtocolError as exc:
            return f"malformed request: {exc}"
        if self.accepts is not None and header.api_key not in self.accepts:
            outbox.put_nowait(_Answer(data=self.reject(header)))
            return None
        loop = asyncio.get_running_loop()
        request = Request(
            header,
            frame,
            offset,
            self.name,
            peer,
            received,
            loop.create_future(),
            loop.create_future(),
            principal=principal,
        )
        await self.channel.submit(request)
        outbox.put_nowait(_Answer(request=request))
        assert request.handled is not None
        await request.handled  # one request handled at a time per connection: appends keep their order
        return None


def _accepted(writer: asyncio.StreamWriter) -> tuple[socket.socket | None, str, str]:
    """A new connection's socket (TCP_NODELAY set), its peer as ``ip:port``, and its ip."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    peername = writer.get_extra_info("peername")
    if isinstance(peername, tuple):
        return sock, f"{peername[0]}:{peername[1]}", str(peername[0])
    return sock, str(peername), str(peername)


@dataclass(frozen=True, slots=True)
class _Answer:
    """What a connection writes next: a ready frame, a request's answer once it settles, or the end."""

    data: bytes | None = None
    request: Request | None = None
    close: str | None = None
