"""A deterministic asyncio loop for the simulator: virtual time, no I/O, driven one step at a time.

The controller runs on it unchanged. Time moves only when the simulator says so (``advance``), so a
ten-second session timeout costs nothing, and callbacks run in the order they were scheduled, so a
seed replays exactly. Nothing here may touch a socket or a thread: ``run_in_executor`` runs the call
at once, on the caller.
"""

# The base loop's timer heap and ready queue are what a loop subclass drives; CPython 3.11's names.
# ruff: noqa: SLF001

from __future__ import annotations

import asyncio
import asyncio.events
import heapq
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["SimLoop"]


class _NoSelector:
    """What the base loop polls for I/O: never anything, and never a wait."""

    def select(self, timeout: float | None) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """An event loop whose clock is a number the simulator moves."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self._selector = _NoSelector()
        self._clock_resolution = 1e-9

    # -- what the base loop needs

    def time(self) -> float:
        return self._now

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # call_soon_threadsafe: there is one thread

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    # -- what the simulator drives

    def _due(self) -> bool:
        scheduled = self._scheduled  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._cancelled:
            heapq.heappop(scheduled)._scheduled = False
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
        return bool(self._ready) or bool(scheduled and scheduled[0]._when <= self._now)  # type: ignore[attr-defined]

    def run_until_idle(self, limit: int = 1_000_000) -> int:
        """Run every callback that is due now, and those they schedule for now, without moving time;
        the number of loop iterations. ``limit`` stops a livelock (a callback rescheduling itself at
        once, forever) with an error instead of a hang."""
        iterations = 0
        asyncio.events._set_running_loop(self)
        try:
            while self._due():
                self._run_once()  # type: ignore[attr-defined]
                iterations += 1
                if iterations >= limit:
                    raise RuntimeError(
                        f"the loop is still busy after {limit} iterations at t={self._now:.3f}"
                    )
        finally:
            asyncio.events._set_running_loop(None)
        return iterations

    def next_timer(self) -> float | None:
        """When the earliest live timer is due, or None."""
        self._due()
        scheduled = self._scheduled  # type: ignore[attr-defined]
        return scheduled[0]._when if scheduled else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running each timer at its own time on the way."""
        target = self._now + seconds
        self.run_until_idle()
        while (when := self.next_timer()) is not None and when <= target:
            self._now = max(self._now, when)
            self.run_until_idle()
        self._now = target
        self.run_until_idle()

    def run_task(self, coro: Any, timeout: float = 600.0) -> Any:
        """Run ``coro`` to its end in virtual time (for set-up and tear-down): its result."""
        asyncio.events._set_running_loop(self)
        try:
            task = self.create_task(coro)
        finally:
            asyncio.events._set_running_loop(None)
        deadline = self._now + timeout
        while not task.done():
            self.run_until_idle()
            if task.done():
                break
            when = self.next_timer()
            if when is None or when > deadline:
                raise TimeoutError(f"{coro!r} did not finish within {timeout} s of virtual time")
            self._now = max(self._now, when)
        return task.result()
