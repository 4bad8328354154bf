"""A ZooKeeper session (in the test's own chroot) for the admin tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.zookeeper import session
from zkstore.aio import AsyncZooKeeper


@pytest.fixture
async def zk(zk_connect: str) -> AsyncIterator[AsyncZooKeeper]:
    client = await session(zk_connect)
    try:
        yield client
    finally:
        await client.close()
