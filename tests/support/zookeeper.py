"""ZooKeeper for integration tests: sessions, forced session expiry, cut connections, partition state,
brokers registered without a broker process."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from kazoo.client import KazooClient

from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect
from zkstore.registration import register_broker
from zkstore.security import ZkSecurity


async def session(connect: str, security: ZkSecurity | None = None) -> AsyncZooKeeper:
    zk = AsyncZooKeeper(connect, session_timeout_ms=6000, security=security)
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


class ConnectionCutter:
    """A TCP forwarder in front of ZooKeeper whose connections can be cut: a network blip that drops
    a client's connection but not its session (kazoo reconnects to the same session, and has dropped
    every watch meanwhile). While ``held``, new connections are closed at once."""

    def __init__(self, target: str) -> None:
        host, _, port = target.partition(":")
        self.target = (host, int(port))
        self.held = False
        self.swallowing = False
        """While True, ZooKeeper's replies are dropped: requests arrive and are applied, answers never
        come (cut afterwards, that is a reply lost with the connection)."""
        self._swallow_after: bytes | None = None
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

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, replies: bool) -> None:
            try:
                while data := await src.read(65536):
                    if not replies and self._swallow_after is not None and self._swallow_after in data:
                        self.swallowing, self._swallow_after = True, None
                    if replies and self.swallowing:
                        continue
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))
        self._writers.difference_update((writer, up_writer))

    def cut(self, *, hold: bool) -> None:
        """Close every forwarded connection; with ``hold``, refuse new ones until :meth:`release`."""
        self.held = hold
        self.swallowing, self._swallow_after = False, None
        for writer in list(self._writers):
            writer.close()

    def release(self) -> None:
        self.held = False

    def lose_replies(self, after: bytes) -> None:
        """Drop ZooKeeper's answers until the next :meth:`cut`, from the first request whose bytes
        contain ``after`` on (a path or a payload only that request carries)."""
        self._swallow_after = after

    async def close(self) -> None:
        self.cut(hold=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def partition_state(
    zk: AsyncZooKeeper, topic: str, partition: int
) -> tuple[znodes.LeaderIsrState, int]:
    """A partition's state znode, decoded, and its version (the partition epoch)."""
    path = znodes.partition_state_path(topic, partition)
    data, stat = await zk.get(path)
    state = znodes.decode_leader_isr_state(data, path)
    assert state is not None
    return state, stat.version


@contextlib.asynccontextmanager
async def stand_in_controller(connect: str, controller_id: int) -> AsyncIterator[int]:
    """For a test that sends control requests itself: win the controller election in ZooKeeper as a
    controller daemon would, so that brokers confirm the epoch (``controller.epoch.confirmation``);
    yields that epoch and holds ``/controller`` until the block ends."""
    zk = await session(connect)
    try:
        registration = znodes.ControllerRegistration(controller_id, int(time.time() * 1000))
        token = await try_elect(zk, controller_id, registration.encode())
        assert token is not None, "another controller holds /controller"
        yield token.epoch
    finally:
        await zk.close()


async def topic_replicas(zk: AsyncZooKeeper, topic: str) -> dict[int, tuple[int, ...]]:
    """A topic's replicas per partition, as ``/brokers/topics/T`` holds them."""
    data, _ = await zk.get(znodes.topic_path(topic))
    decoded = znodes.decode_topic_assignment(data, znodes.topic_path(topic))
    assert decoded is not None
    return dict(decoded.partitions)


def registration(broker_id: int, rack: str | None = None) -> bytes:
    endpoint = znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
    return znodes.BrokerRegistration(broker_id, (endpoint,), {"PLAINTEXT": "PLAINTEXT"}, 0, rack).encode()


async def register(zk: AsyncZooKeeper, *broker_ids: int) -> dict[int, int]:
    """Brokers registered as a broker does (KIP-380); their epochs."""
    return {b: await register_broker(zk, b, registration(b, rack=f"rack-{b % 2}")) for b in broker_ids}
