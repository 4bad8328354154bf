"""The group coordinator's scheduler on the event loop: named per-group timers and background tasks.

Kafka's coordinator keeps its delayed joins, syncs and heartbeats in purgatories and loads partitions
on a scheduler thread; here both are the broker's event loop, the one writer of every group. A timer
is named within its group (``heartbeat:<member>``, ``pending:<member>``, ``join``, ``sync``): at most
one per name, scheduling a name again replaces it, and a timer that fires is forgotten before its
callback runs. A failing callback or task is logged, never lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("broker.group")


class GroupScheduler:
    def __init__(self) -> None:
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the coordinator is not bound to an event loop"
        return self._loop

    def schedule(self, group_id: str, name: str, delay_ms: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop in ``delay_ms``, replacing the group's timer of that name."""
        key = (group_id, name)
        self.cancel(group_id, name)

        def fire() -> None:
            if self._timers.get(key) is handle:
                del self._timers[key]
            try:
                callback()
            except Exception:
                log.exception("group %s: timer %s failed", group_id, name)

        handle = self.loop.call_later(delay_ms / 1000.0, fire)
        self._timers[key] = handle

    def is_scheduled(self, group_id: str, name: str) -> bool:
        return (group_id, name) in self._timers

    def cancel(self, group_id: str, name: str) -> None:
        handle = self._timers.pop((group_id, name), None)
        if handle is not None:
            handle.cancel()

    def cancel_group(self, group_id: str) -> None:
        for key in [k for k in self._timers if k[0] == group_id]:
            self._timers.pop(key).cancel()

    def cancel_all(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str | None = None) -> None:
        """Run ``coro`` as a task of its own whose failure is logged (nobody awaits it)."""
        self.loop.create_task(coro, name=name).add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("group coordinator task failed", exc_info=task.exception())
