"""Broker registration per KIP-380: the czxid of ``/brokers/ids/N`` is the broker's epoch.

ZooKeeper's create reply carries no stat, so registration is one multi-op: create the ephemeral
node empty, then set its data at version 0; the setData result's stat carries the czxid. Both happen
atomically, so the epoch returned is exactly the one of the node this session owns.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import NodeExistsError, NoNodeError

from zkstore.aio import AsyncZooKeeper
from zkstore.ops import Create, SetData
from zkstore.znodes import BROKER_IDS, broker_path

__all__ = ["BrokerIdInUse", "register_broker"]

log = logging.getLogger("zkstore.registration")


class BrokerIdInUse(Exception):
    """``/brokers/ids/N`` belongs to another live session: another broker runs with this id."""

    def __init__(self, broker_id: int, owner_session: int) -> None:
        super().__init__(
            f"broker id {broker_id} is registered by another live ZooKeeper session 0x{owner_session:x}; "
            "is another broker running with the same broker.id?"
        )
        self.broker_id = broker_id
        self.owner_session = owner_session


async def register_broker(
    zk: AsyncZooKeeper, broker_id: int, payload: bytes, *, wait_for_owner_s: float = 0.0
) -> int:
    """Register ``broker_id`` with ``payload`` (its v5 JSON) and return the broker epoch (czxid).

    If the node already exists and this session owns it (a retry after a lost reply), that is the
    registration and its czxid is returned. If another session owns it, raise BrokerIdInUse, unless
    ``wait_for_owner_s`` allows waiting for that session to expire (a restart after a crash, before
    the old session timed out).
    """
    path = broker_path(broker_id)
    await zk.ensure_path(BROKER_IDS)
    deadline = time.monotonic() + wait_for_owner_s
    while True:
        outcome = await zk.multi([Create(path, b"", ephemeral=True), SetData(path, payload, 0)])
        if not any(isinstance(r, Exception) for r in outcome):
            epoch: int = outcome[1].czxid
            log.info("broker %d registered at %s with epoch %d (0x%x)", broker_id, path, epoch, epoch)
            return epoch
        if not isinstance(outcome[0], NodeExistsError):
            raise next(r for r in outcome if isinstance(r, Exception))
        try:
            _, stat = await zk.get(path)
        except NoNodeError:
            continue  # the previous owner's session just ended: try again
        if stat.ephemeralOwner == zk.session_id:
            epoch = stat.czxid
            log.info("broker %d already registered by this session with epoch %d", broker_id, epoch)
            return epoch
        if time.monotonic() >= deadline:
            raise BrokerIdInUse(broker_id, stat.ephemeralOwner)
        log.info(
            "broker %d: %s still held by session 0x%x; waiting for it to expire",
            broker_id,
            path,
            stat.ephemeralOwner,
        )
        await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
