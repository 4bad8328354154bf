"""Requests and the request channel: a network plane's bounded queue and the handler threads that drain it.

Kafka's RequestChannel and KafkaRequestHandlerPool in one: a listener (``broker/listener.py``) puts
each request in its plane's queue, waiting while the queue is full (back-pressure: nothing is
dropped), and the plane's threads handle what it holds. Each plane has its own queue and threads, so
a flooded data plane cannot delay the control plane (KIP-291): the control plane is one queue of 20
and one thread, and the data plane gives way to it before each request (``broker/control_priority.py``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from broker.control_priority import ControlPriority
from network.frontend import Answer, Close
from protocol import RequestHeader
from security.principal import ANONYMOUS

__all__ = ["Close", "Outcome", "Request", "RequestChannel", "Result"]

log = logging.getLogger("broker.network")

Result = Answer
"""A response frame, no response at all (acks=0 produce), or Close (the front-end's verdict, named here
too for the handlers that return it)."""
Outcome = Result | Future[Result]
"""What a handler returns: a result now, or a future one (a request waiting in a purgatory)."""


@dataclass(slots=True, eq=False)
class Request:
    """A request in a plane: its frame as read (handlers decode the body) and what its handling records."""

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
