"""Controller election through ``/controller`` and ``/controller_epoch``, as Kafka's ZooKeeper mode does it.

The candidate reads the current epoch and its znode version, then in one multi-op creates the
ephemeral ``/controller`` and bumps ``/controller_epoch`` at that version. Winning yields a
:class:`FencingToken` (the new epoch and the version it set) that fences every later write.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from zkstore.aio import AsyncZooKeeper
from zkstore.fencing import ControllerMoved, FencedWriter, FencingToken
from zkstore.ops import Create, Delete, SetData
from zkstore.znodes import CONTROLLER, CONTROLLER_EPOCH, decode_controller_epoch, encode_controller_epoch

__all__ = ["read_controller_epoch", "resign", "try_elect"]

log = logging.getLogger("zkstore.election")

INITIAL_CONTROLLER_EPOCH = 0


def _parse_epoch(data: bytes) -> int:
    epoch = decode_controller_epoch(data, CONTROLLER_EPOCH)
    if epoch is None:
        raise ValueError(f"{CONTROLLER_EPOCH} holds {data[:40]!r}, not an epoch; refusing to guess one")
    return epoch


async def read_controller_epoch(zk: AsyncZooKeeper) -> tuple[int, int]:
    """``(epoch, znode version)`` of ``/controller_epoch``, creating it with 0 when absent.

    A corrupt value is not guessed at: it raises, because an epoch that goes backwards would let a
    deposed controller's requests through.
    """
    while True:
        try:
            data, stat = await zk.get(CONTROLLER_EPOCH)
            return _parse_epoch(data), stat.version
        except NoNodeError:
            try:
                await zk.create(CONTROLLER_EPOCH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
                log.info("created %s with epoch %d", CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH)
            except NodeExistsError:
                pass  # another candidate created it first; read theirs


async def try_elect(zk: AsyncZooKeeper, controller_id: int, payload: bytes) -> FencingToken | None:
    """One election attempt: the token when this candidate won, None when another controller holds it.

    ``payload`` is the ``/controller`` JSON naming ``controller_id``.
    """
    epoch, version = await read_controller_epoch(zk)
    new_epoch = epoch + 1
    outcome = await zk.multi(
        [
            Create(CONTROLLER, payload, ephemeral=True),
            SetData(CONTROLLER_EPOCH, encode_controller_epoch(new_epoch), version),
        ]
    )
    if not any(isinstance(r, Exception) for r in outcome):
        token = FencingToken(epoch=new_epoch, zk_version=outcome[1].version)
        log.info(
            "controller %d elected with epoch %d (epoch znode version %d)",
            controller_id,
            new_epoch,
            token.zk_version,
        )
        return token
    if not any(isinstance(r, (NodeExistsError, BadVersionError)) for r in outcome):
        raise next(r for r in outcome if isinstance(r, Exception))
    return await won_before(zk, new_epoch)


async def won_before(zk: AsyncZooKeeper, new_epoch: int) -> FencingToken | None:
    """After a lost race: whether the race was in fact won by an earlier attempt whose reply was lost
    with the connection. Only our own session can own ``/controller``, and then the epoch must be
    the one we wrote; anything else is another controller's win."""
    try:
        _, controller_stat = await zk.get(CONTROLLER)
        data, epoch_stat = await zk.get(CONTROLLER_EPOCH)
    except NoNodeError:
        return None
    if controller_stat.ephemeralOwner == zk.session_id and _parse_epoch(data) == new_epoch:
        return FencingToken(epoch=new_epoch, zk_version=epoch_stat.version)
    return None


async def resign(zk: AsyncZooKeeper, token: FencingToken) -> bool:
    """Delete ``/controller`` if this incarnation still holds it; True when it did.

    Fenced like every controller write, so a deposed controller cannot remove its successor's node.
    """
    try:
        _, stat = await zk.get(CONTROLLER)
    except NoNodeError:
        return False
    if stat.ephemeralOwner != zk.session_id:
        return False
    try:
        result = await FencedWriter(zk, token).commit([Delete(CONTROLLER, stat.version)])
    except (ControllerMoved, KazooException):
        log.warning("could not resign cleanly; /controller goes with the session", exc_info=True)
        return False
    # NoNode: a delete whose reply was lost with the connection, sent again (``AsyncZooKeeper``).
    return not isinstance(result[0], Exception) or isinstance(result[0], NoNodeError)
