"""One queue, one consumer: the only task that changes the controller's state.

Watches, RPC handlers, timers and response callbacks call ``put``; the consumer takes one event at
a time, sets ``state`` to the event's controller state while it runs, and reports how long the
event waited and how long it took, per state, as Kafka's ControllerEventManager does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from controller.events import ControllerEvent, ControllerState

log = logging.getLogger("controller.events")


class EventTimings(Protocol):
    def event_dequeued(self, event: ControllerEvent, queue_ms: float) -> None: ...

    def event_processed(self, event: ControllerEvent, processing_ms: float) -> None: ...


class EventManager:
    def __init__(
        self, process: Callable[[ControllerEvent], Awaitable[None]], timings: EventTimings | None = None
    ) -> None:
        self._process = process
        self._timings = timings
        self._queue: collections.deque[tuple[ControllerEvent, float]] = collections.deque()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.state = ControllerState.IDLE

    @property
    def size(self) -> int:
        return len(self._queue)

    def put(self, event: ControllerEvent) -> None:
        self._queue.append((event, time.monotonic()))
        self._ready.set()

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop everything queued (each dropped event is preempted), then queue ``event``."""
        while self._queue:
            self._preempt(self._queue.popleft()[0])
        self.put(event)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="controller-event-thread")

    async def stop(self) -> None:
        """Cancel the event in progress and preempt the queued ones (a resigned or stopping controller must
        not act on them)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        while self._queue:
            self._preempt(self._queue.popleft()[0])

    @staticmethod
    def _preempt(event: ControllerEvent) -> None:
        try:
            event.preempt()
        except Exception:
            log.exception("preempting %s failed", type(event).__name__)

    async def _run(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            event, enqueued = self._queue.popleft()
            started = time.monotonic()
            if self._timings is not None:
                self._timings.event_dequeued(event, (started - enqueued) * 1000)
            self.state = event.state
            try:
                await self._process(event)
            except asyncio.CancelledError:
                self._preempt(event)  # stopped in the middle: its caller is answered as if dropped
                raise
            except Exception:
                log.exception("error processing %s", type(event).__name__)
            finally:
                self.state = ControllerState.IDLE
                if self._timings is not None:
                    self._timings.event_processed(event, (time.monotonic() - started) * 1000)
