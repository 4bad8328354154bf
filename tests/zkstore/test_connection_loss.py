"""Requests lost with the connection (kazoo's ConnectionLoss) are sent again once reconnected, as
Kafka's ZooKeeper client does; a write whose reply was lost is told from somebody else's.

A ``ConnectionCutter`` stands between the client and ZooKeeper: it lets a request through, drops the
answer, and then cuts the connection, so the request was applied and its reply is lost. The client
reconnects to the same session.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from kazoo.exceptions import NodeExistsError

from tests.support.waiting import wait_until
from tests.support.zookeeper import ConnectionCutter, session
from zkstore.aio import AsyncZooKeeper
from zkstore.election import resign, try_elect
from zkstore.znodes import CONTROLLER

pytestmark = pytest.mark.zookeeper


@dataclass
class CutOff:
    zk: AsyncZooKeeper
    """A session through the cutter."""
    admin: AsyncZooKeeper
    """A session straight to ZooKeeper, to see what was applied."""
    cutter: ConnectionCutter


@pytest.fixture
async def cut_off(zk_connect: str) -> AsyncIterator[CutOff]:
    server, _, chroot = zk_connect.partition("/")
    cutter = ConnectionCutter(server)
    port = await cutter.start()
    zk = await session(f"127.0.0.1:{port}/{chroot}")
    admin = await session(zk_connect)
    try:
        yield CutOff(zk, admin, cutter)
    finally:
        await zk.close()
        await admin.close()
        await cutter.close()


async def exists(zk: AsyncZooKeeper, path: str) -> bool:
    return await zk.exists(path) is not None


async def test_a_create_whose_reply_was_lost_is_sent_again(cut_off: CutOff) -> None:
    cut_off.cutter.lose_replies(after=b"/made")
    creating = asyncio.create_task(cut_off.zk.create("/made"))
    await wait_until(lambda: exists(cut_off.admin, "/made"), what="the create applied")
    cut_off.cutter.cut(hold=False)
    with pytest.raises(NodeExistsError):  # sent again: it finds its own znode, not a lost connection
        await asyncio.wait_for(creating, 30)
    assert cut_off.zk.retried >= 1


async def test_an_election_whose_reply_was_lost_is_won(cut_off: CutOff) -> None:
    """Our own session owns /controller: we are the controller, not a candidate that lost."""
    cut_off.cutter.lose_replies(after=b'{"brokerid":1}')  # the multi-op, not the epoch read before it
    electing = asyncio.create_task(try_elect(cut_off.zk, 1, b'{"brokerid":1}'))
    await wait_until(lambda: exists(cut_off.admin, CONTROLLER), what="/controller created")
    cut_off.cutter.cut(hold=False)
    token = await asyncio.wait_for(electing, 30)
    assert token is not None and token.epoch == 1


async def test_a_resignation_whose_reply_was_lost_counts(cut_off: CutOff) -> None:
    token = await try_elect(cut_off.zk, 1, b'{"brokerid":1}')
    assert token is not None
    cut_off.cutter.lose_replies(after=b"/controller_epoch")  # the fenced delete, not the read before it
    resigning = asyncio.create_task(resign(cut_off.zk, token))

    async def gone() -> bool:
        return not await exists(cut_off.admin, CONTROLLER)

    await wait_until(gone, what="/controller deleted")
    cut_off.cutter.cut(hold=False)
    assert await asyncio.wait_for(resigning, 30) is True


def test_reconnection_attempts_come_at_least_every_second() -> None:
    """kazoo's default doubles the wait between attempts up to an hour: a daemon cut off from
    ZooKeeper for half a minute then learned of its expired session (a zombie controller that it was
    deposed) up to half a minute after the network healed, as chaos runs showed."""
    retry = AsyncZooKeeper("127.0.0.1:1").client._conn_retry  # the policy kazoo's connect loop uses
    assert retry.max_tries == -1 and retry.max_delay <= 1.0
