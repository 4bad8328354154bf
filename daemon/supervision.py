"""Long-running tasks that cannot die silently.

A daemon whose sender, fetcher or registration task has ended on an unexpected exception is up but
no longer does its job, which is worse than a crash: nothing restarts it. ``supervised`` runs such a
task's body again after any exception, logging it with the task's name each time; cancellation
ends it as usual, and a body that returns is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("daemon.supervision")

RESTART_BACKOFF_S = 1.0


async def supervised(
    name: str, body: Callable[[], Awaitable[None]], *, backoff_s: float = RESTART_BACKOFF_S
) -> None:
    """Run ``body()`` until it returns, restarting it ``backoff_s`` after each unexpected exception."""
    failures = 0
    while True:
        try:
            await body()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            failures += 1
            log.exception("task %s failed (%d so far); restarting it in %.1f s", name, failures, backoff_s)
            await asyncio.sleep(backoff_s)


def start_supervised(
    name: str, body: Callable[[], Awaitable[None]], *, backoff_s: float = RESTART_BACKOFF_S
) -> asyncio.Task[None]:
    """``supervised`` as a task named ``name``."""
    return asyncio.create_task(supervised(name, body, backoff_s=backoff_s), name=name)
