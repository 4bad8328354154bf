"""Small helpers for ZooKeeper integration tests: connected sessions and forced session expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kazoo.client import KazooClient

from zkstore.aio import AsyncZooKeeper


async def session(connect: str) -> AsyncZooKeeper:
    zk = AsyncZooKeeper(connect, session_timeout_ms=6000)
    await zk.start()
    return zk


async def expire_session(zk: AsyncZooKeeper) -> None:
    """Make the server expire ``zk``'s session, as if it had been paused past its timeout.

    A second client attaches to the same session id and password and closes it; the server then
    treats the session as ended and the original client sees it expire on its next contact.
    """
    session_id, password = zk.client.client_id
    twin = KazooClient(hosts=zk.hosts, client_id=(session_id, password))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, twin.start, 15)
    await loop.run_in_executor(None, twin.stop)
    twin.close()


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]], timeout: float = 15.0, what: str = "condition"
) -> None:
    """Poll ``condition`` (plain or async) on the loop until it holds; fail after ``timeout`` seconds."""
    deadline = loop_time() + timeout
    while True:
        held = condition()
        if not isinstance(held, bool):
            held = await held
        if held:
            return
        if loop_time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


def loop_time() -> float:
    return asyncio.get_running_loop().time()
