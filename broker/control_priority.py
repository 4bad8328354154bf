"""Control priority (KIP-291 in one interpreter): data-plane work gives way while control work is pending.

Separate queues are not enough when every thread shares one GIL: CPU-bound data-plane handlers slow
every step of a control request. Control work counts as pending from the moment a control request's
first bytes reach the kernel (a zero-timeout epoll on the control connections) or the loop
(``_ArrivalReader.feed_data``) until its answer is written; data-plane threads block at their
checkpoints meanwhile, for a bounded time. ``ControlConnection`` is how the control-plane listener
tells the front-end (``network/frontend.py``) to announce its requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import select
import socket
import threading
import time
from collections.abc import Callable

from network.frontend import READ_LIMIT

__all__ = ["ControlConnection", "ControlPriority"]


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
    PRIORITY_BUDGET_S = 0.1
    """How long one busy period of the control plane may hold the data plane back. Ordinary control
    requests take a few milliseconds and keep their priority whole; a huge one (a million-partition
    UpdateMetadata decodes and applies for seconds) then shares the interpreter instead of stopping
    client traffic for its whole length."""

    def __init__(self) -> None:
        self._in_flight = 0
        self._busy_since = 0.0
        """When the control plane last went from idle to busy (monotonic; written on the loop)."""
        """Connections with a request between its first byte and its answer; written only on the
        event loop, read by data-plane threads."""
        self._done = threading.Event()
        """Set, and replaced, each time the control plane has no request left in flight."""
        self._poller = select.epoll() if hasattr(select, "epoll") else None
        self._ready = _ready_probe(self._poller) if self._poller is not None else lambda: False
        self._watched = 0

    def begin(self) -> None:
        """On the event loop, when the first bytes of a control request arrive."""
        if self._in_flight == 0:
            self._busy_since = time.monotonic()
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
        has answered (or MAX_PAUSE_S has passed), for the first PRIORITY_BUDGET_S of a busy period.

        A blocked thread does not compete for the GIL, so the event loop and the control handler
        get it at the next switch. Nothing here takes a lock the control path needs.
        """
        if not self.pending():
            return
        if self._in_flight and time.monotonic() - self._busy_since >= self.PRIORITY_BUDGET_S:
            return
        self._done.wait(self.MAX_PAUSE_S)

    def close(self) -> None:
        if self._poller is not None:
            self._poller.close()


class _ArrivalReader(asyncio.StreamReader):
    """A control connection's reader: control work counts from a request's first byte to its answer.

    The loop hands bytes to the reader (``feed_data``) well before the coroutine waiting on them runs
    again; announcing the request only once it is parsed would let data-plane threads take the GIL
    back in between.
    """

    def __init__(self, priority: ControlPriority) -> None:
        super().__init__(limit=READ_LIMIT)
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


class ControlConnection:
    """What the control-plane listener's front-end reports about one connection, turned into
    pending control work: the reader announces a request's first bytes, the kernel's unread bytes
    count once authenticated, and the work ends with the answer or the connection."""

    def __init__(self, priority: ControlPriority) -> None:
        self._priority = priority
        self._reader = _ArrivalReader(priority)
        self._fd = -1

    @property
    def reader(self) -> asyncio.StreamReader:
        return self._reader

    def authenticated(self, sock: socket.socket | None) -> None:
        self._reader.settle()
        if sock is not None:
            self._fd = sock.fileno()
            self._priority.watch(self._fd)

    def answered(self) -> None:
        self._reader.settle()

    def closed(self) -> None:
        if self._fd >= 0:
            self._priority.unwatch(self._fd)
            self._fd = -1
        self._reader.release()
