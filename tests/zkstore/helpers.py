"""Small helpers for ZooKeeper integration tests: sessions, forced session expiry, cut connections."""

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


class ConnectionCutter:
    """A TCP forwarder in front of ZooKeeper whose connections can be cut: a network blip that drops
    a client's connection but not its session (kazoo reconnects to the same session, and has dropped
    every watch meanwhile). While ``held``, new connections are closed at once."""

    def __init__(self, target: str) -> None:
        host, _, port = target.partition(":")
        self.target = (host, int(port))
        self.held = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.held:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    def cut(self, *, hold: bool) -> None:
        """Close every forwarded connection; with ``hold``, refuse new ones until :meth:`release`."""
        self.held = hold
        for writer in list(self._writers):
            writer.close()

    def release(self) -> None:
        self.held = False

    async def close(self) -> None:
        self.cut(hold=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
