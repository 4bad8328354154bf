"""Waiting on conditions, never on fixed times: the one ``wait_until`` of the suite, and its blocking twin."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.01


async def wait_until(
    condition: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = POLL_INTERVAL_S,
) -> T:
    """Poll ``condition`` (plain or async) on the loop until it returns something true, and return it.

    Fails with an AssertionError naming ``what`` after ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], T], what: str, *, timeout: float = DEFAULT_TIMEOUT_S, interval: float = 0.1
) -> T:
    """``wait_until`` for code outside an event loop (a thread, or a test with no loop)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return value
