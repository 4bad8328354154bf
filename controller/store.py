"""The controller's typed view of ZooKeeper: batched reads with watches, and fenced writes.

Reads of many znodes go through ZooKeeper's multi-read (``zkstore.batch_read``); corrupt payloads
are logged by the tolerant decoders and skipped. Writes go through the FencedWriter of the current
controller incarnation, so every one of them fails once another controller has been elected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from controller.context import LiveBroker
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_children_many, get_data_many
from zkstore.election import resign, try_elect
from zkstore.fencing import Answered, FencedWriter, FencingToken
from zkstore.ops import Op

log = logging.getLogger("controller.store")

Watch = Callable[[WatchedEvent], None]


class ControllerStore:
    def __init__(self, zk: AsyncZooKeeper) -> None:
        self.zk = zk
        self.writer: FencedWriter | None = None

    def fence(self, token: FencingToken | None) -> None:
        """Write as the incarnation that won ``token`` from now on; None: write nothing at all."""
        self.writer = None if token is None else FencedWriter(self.zk, token)

    @property
    def token(self) -> FencingToken | None:
        return self.writer.token if self.writer is not None else None

    async def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Fenced multi-ops; raises ControllerMoved when we are no longer the controller."""
        if self.writer is None:
            raise RuntimeError("not the active controller: no fencing token")
        if not ops:
            return []
        return await self.writer.commit(ops)

    async def commit_stream(self, ops: Iterable[Op], answered: Answered | None = None) -> list[Any]:
        """``commit`` of ops produced as the earlier ones are committed (``FencedWriter.commit_stream``):
        the caller plans the next multi-op, and works on the answers as they come, while others are at
        ZooKeeper."""
        if self.writer is None:
            if next(iter(ops), None) is None:
                return []  # nothing to write, as ``commit`` of no ops
            raise RuntimeError("not the active controller: no fencing token")
        return await self.writer.commit_stream(ops, answered)

    async def ensure_paths(self, paths: Iterable[str]) -> None:
        """Create missing persistent znodes (not fenced: they are structure, not state)."""
        for path in paths:
            await self.zk.ensure_path(path)

    async def commit_ignoring_missing(self, ops: Sequence[Op]) -> None:
        """Fenced clean-up writes (deletes of handled requests) for which a missing znode is fine."""
        for op, result in zip(ops, await self.commit(ops), strict=True):
            if isinstance(result, Exception) and not isinstance(result, NoNodeError):
                log.warning("%s %s failed: %r", type(op).__name__, op.path, result)

    # -- /controller

    async def try_elect(self, controller_id: int, payload: bytes) -> FencingToken | None:
        """One election attempt (``zkstore.election``); the token when we won."""
        return await try_elect(self.zk, controller_id, payload)

    async def resign(self, token: FencingToken) -> None:
        """Delete ``/controller`` if the incarnation of ``token`` still holds it (a fenced delete)."""
        await resign(self.zk, token)

    async def controller_owner(self, watch: Watch | None = None) -> tuple[int, bool]:
        """The active controller's id (-1 if none) and whether our session owns ``/controller``.

        Leaves a data watch on ``/controller``, or an exists watch when it is absent.
        """
        try:
            data, stat = await self.zk.get(znodes.CONTROLLER, watch=watch)
        except NoNodeError:
            await self.zk.exists(znodes.CONTROLLER, watch=watch)
            return -1, False
        registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
        owned = stat.ephemeralOwner == self.zk.session_id
        return (registration.broker_id if registration else -1), owned

    async def controller_id(self, watch: Watch | None = None) -> int | None:
        """The active controller's id, setting an exists/data watch on ``/controller``; None if absent."""
        stat = await self.zk.exists(znodes.CONTROLLER, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = await self.zk.get(znodes.CONTROLLER, watch=watch)
        except NoNodeError:
            return None
        registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
        return registration.broker_id if registration else None

    # -- brokers

    async def brokers(
        self, watch: Watch | None = None, data_watch: Watch | None = None
    ) -> dict[int, LiveBroker]:
        """Every registered broker with its epoch (the czxid of its registration znode).

        ``watch`` watches the list; ``data_watch`` watches each registration too, which takes one get
        per broker instead of a multi-read (multi-reads set no watches).
        """
        try:
            children = await self.zk.get_children(znodes.BROKER_IDS, watch=watch)
        except NoNodeError:
            await self.zk.ensure_path(znodes.BROKER_IDS)
            children = await self.zk.get_children(znodes.BROKER_IDS, watch=watch)
        paths = [f"{znodes.BROKER_IDS}/{c}" for c in children if c.isdigit()]
        out: dict[int, LiveBroker] = {}
        if data_watch is None:
            results: list[Any] = await get_data_many(self.zk, paths)
        else:
            results = await asyncio.gather(
                *(self.zk.get(p, watch=data_watch) for p in paths), return_exceptions=True
            )
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, BaseException):
                if data_watch is not None and not isinstance(result, NoNodeError):
                    raise result  # the session or connection failed, as get_data_many would raise
                continue  # gone since the listing: the next BrokerChange will say so
            data, stat = result
            registration = znodes.decode_broker_registration(data, path)
            if registration is not None:
                out[registration.broker_id] = LiveBroker(registration, stat.czxid)
        return out

    async def broker(self, broker_id: int, watch: Watch | None = None) -> LiveBroker | None:
        path = znodes.broker_path(broker_id)
        try:
            data, stat = await self.zk.get(path, watch=watch)
        except NoNodeError:
            return None
        registration = znodes.decode_broker_registration(data, path)
        return None if registration is None else LiveBroker(registration, stat.czxid)

    # -- topics

    async def topics(self, watch: Watch | None = None) -> list[str]:
        try:
            return await self.zk.get_children(znodes.BROKER_TOPICS, watch=watch)
        except NoNodeError:
            await self.zk.ensure_path(znodes.BROKER_TOPICS)
            return await self.zk.get_children(znodes.BROKER_TOPICS, watch=watch)

    async def assignments(
        self, topics: Sequence[str], watch: Watch | None = None
    ) -> dict[str, znodes.TopicAssignment]:
        """``/brokers/topics/T`` of each topic; ``watch`` sets a data watch on each (partition additions)."""
        paths = [znodes.topic_path(t) for t in topics]
        if watch is None:
            results: list[Any] = await get_data_many(self.zk, paths)
        else:
            results = await asyncio.gather(
                *(self.zk.get(p, watch=watch) for p in paths), return_exceptions=True
            )
        out = {}
        for topic, path, result in zip(topics, paths, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, NoNodeError):
                    raise result
                continue
            assignment = znodes.decode_topic_assignment(result[0], path)
            if assignment is not None:
                out[topic] = assignment
        return out

    async def leadership(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The state znodes of ``partitions`` that exist and parse, with their versions.

        Most partitions of a cluster hold one of few payloads (the same leader, epochs and ISR), so each
        distinct payload and version is decoded once and its immutable value shared: at a million
        partitions the JSON parsing was the largest cost of a failover.
        """
        paths = znodes.partition_state_paths(partitions)
        out = {}
        seen: dict[tuple[bytes, int], tuple[LeaderIsrAndControllerEpoch | None, str]] = {}
        for tp, path, result in zip(partitions, paths, await get_data_many(self.zk, paths), strict=True):
            if isinstance(result, Exception):
                continue
            data, stat = result
            key = (data, stat.version)
            known = seen.get(key)
            if known is None:
                known = seen[key] = (_leadership(data, stat.version, path), path)
            elif known[0] is None:
                log.warning("%s: ignoring partition state: the same unreadable payload as %s", path, known[1])
            if known[0] is not None:
                out[tp] = known[0]
        return out

    # -- admin paths

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        try:
            return await self.zk.get_children(path, watch=watch)
        except NoNodeError:
            await self.zk.ensure_path(path)
            return await self.zk.get_children(path, watch=watch)

    async def data_if_exists(self, path: str, watch: Watch | None = None) -> tuple[bytes, int] | None:
        """Data and version of ``path``, leaving an exists watch when it is absent."""
        stat = await self.zk.exists(path, watch=watch)
        if stat is None:
            return None
        try:
            data, stat = await self.zk.get(path, watch=watch)
        except NoNodeError:
            return None
        return data, stat.version

    async def data_many(self, paths: Sequence[str]) -> list[bytes | None]:
        results = await get_data_many(self.zk, paths)
        return [None if isinstance(r, Exception) else r[0] for r in results]

    async def children_many(self, paths: Sequence[str]) -> list[list[str]]:
        results = await get_children_many(self.zk, paths)
        return [[] if isinstance(r, Exception) else r for r in results]


def _leadership(data: bytes, version: int, path: str) -> LeaderIsrAndControllerEpoch | None:
    state = znodes.decode_leader_isr_state(data, path)
    if state is None:
        return None  # logged once, for the first partition with this payload
    leader_and_isr = LeaderAndIsr(
        state.leader, state.leader_epoch, state.isr, version, state.leader_recovery_state
    )
    return LeaderIsrAndControllerEpoch(leader_and_isr, state.controller_epoch)
