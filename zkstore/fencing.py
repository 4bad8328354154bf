"""Controller writes fenced by the version of ``/controller_epoch`` (Kafka's KAFKA-6082 fix).

A controller that lost its election, or whose session expired while it was paused (a zombie), must
not be able to change the cluster. Every write therefore goes in a multi-op that starts with a
``check`` of ``/controller_epoch`` at the version this controller set when it won: once another
controller has bumped the epoch, the check fails and nothing in the batch is applied.

Large batches are split into several multi-ops, each under ZooKeeper's 1 MB request limit and each
carrying its own check. Within one multi-op a single failing write (typically a partition state whose
compare-and-set version moved) rolls back its neighbours; those are retried without it, so one stale
partition does not fail the whole batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError, RuntimeInconsistency

from zkstore.aio import AsyncZooKeeper
from zkstore.ops import Check, Op, SetData, op_size
from zkstore.znodes import CONTROLLER_EPOCH

__all__ = ["Answered", "ControllerMoved", "FencedWriter", "FencingToken"]

log = logging.getLogger("zkstore.fencing")

# ZooKeeper refuses requests larger than jute.maxbuffer (1 MiB - 1 by default). Stay well below it,
# leaving room for the multi-op framing and the check op.
DEFAULT_MAX_BATCH_BYTES = 900 * 1024
# Measured: multi-ops of a few hundred small writes reach ~38k ops/s; larger ones gain little.
DEFAULT_MAX_BATCH_OPS = 500

Answered = Callable[[int, list[Any]], None]
"""Told of each multi-op's results as they come: (index of its first op, its results)."""

IN_FLIGHT = 4
"""Multi-ops of data writes sent before the first answer: the round trips overlap, as the benchmarks'
multi-op write floor pipelines them."""


class ControllerMoved(Exception):
    """``/controller_epoch`` is no longer at this controller's version: another controller won."""


@dataclass(frozen=True, slots=True)
class FencingToken:
    """What a controller won: its epoch, and the znode version of ``/controller_epoch`` it set."""

    epoch: int
    zk_version: int


@dataclass(slots=True)
class FencedWriter:
    """Writes on behalf of one controller incarnation, fenced by its token."""

    zk: AsyncZooKeeper
    token: FencingToken
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    max_batch_ops: int = DEFAULT_MAX_BATCH_OPS

    def _check(self) -> Check:
        return Check(CONTROLLER_EPOCH, self.token.zk_version)

    def batches(self, ops: Sequence[Op]) -> list[list[int]]:
        """Indexes of ``ops`` grouped into multi-ops within the size and count limits."""
        groups: list[list[int]] = []
        start = 0
        for group in self._groups(ops):
            groups.append(list(range(start, start + len(group))))
            start += len(group)
        return groups

    def _groups(self, ops: Iterable[Op]) -> Iterator[list[Op]]:
        """``ops`` in multi-ops within the size and count limits, each handed out as soon as it is
        full: ``ops`` may be produced while earlier groups are at ZooKeeper (``commit_stream``)."""
        current: list[Op] = []
        check_cost = op_size(self._check())
        size = check_cost
        for op in ops:
            cost = op_size(op)
            if cost + check_cost > self.max_batch_bytes:
                raise ValueError(f"a single write to {op.path} of {cost} bytes exceeds the request limit")
            if current and size + cost > self.max_batch_bytes:
                yield current
                current, size = [], check_cost
            current.append(op)
            size += cost
            if len(current) >= self.max_batch_ops:
                yield current
                current, size = [], check_cost
        if current:
            yield current

    async def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Apply ``ops``; return one slot per op: its result, or the exception that op failed with.

        Raises ControllerMoved (and applies nothing further) as soon as the epoch check fails.
        Batches of data writes only (a controlled shutdown's or a failover's new leaders) are sent
        ``IN_FLIGHT`` at a time: no batch depends on another, and a moved epoch fails every batch
        after it. Batches with creates or deletes go one after another, since a retried batch (one
        op dropped) must not land after the batch that creates or deletes under it.
        """
        groups = list(self._groups(ops))
        if len(groups) == 1 or not all(isinstance(op, SetData) for op in ops):
            results: list[Any] = []
            for group in groups:
                results += await self._commit_group(group)
            return results
        return await self._pipelined(iter(groups))

    async def commit_stream(self, ops: Iterable[Op], answered: Answered | None = None) -> list[Any]:
        """``commit`` of ops produced while they are committed: each multi-op is sent as soon as it is
        full, so the producer's work for the next one (planning a controlled shutdown's next 500
        elections) runs while up to ``IN_FLIGHT`` are at ZooKeeper. Data writes are pipelined as in
        ``commit``; from the first group holding a create or a delete on, the groups go one after
        another, once those in flight have been answered. Results are in the order of ``ops``; each
        multi-op's are also handed to ``answered`` (offset of its first op, its results) as they come,
        so the caller can work on them while later ones are at ZooKeeper."""
        return await self._pipelined(self._groups(ops), answered)

    async def _pipelined(self, groups: Iterator[list[Op]], answered: Answered | None = None) -> list[Any]:
        """Commit ``groups`` in order, data-only ones ``IN_FLIGHT`` at a time, the rest (from the
        first with a create or a delete on) one after another; a failure (such as ControllerMoved) is
        raised once every group sent has been answered, the first group's first."""
        results: list[Any] = []
        window = asyncio.Semaphore(IN_FLIGHT)
        sent: list[asyncio.Future[None]] = []

        async def one(group: list[Op], offset: int) -> None:
            try:
                await place(group, offset)
            finally:
                window.release()

        async def place(group: list[Op], offset: int) -> None:
            outcome = await self._commit_group(group)
            results[offset : offset + len(group)] = outcome
            if answered is not None:
                answered(offset, outcome)

        in_order = False
        try:
            for group in groups:
                offset = len(results)
                results.extend([None] * len(group))
                in_order = in_order or not all(isinstance(op, SetData) for op in group)
                if in_order:
                    await _settle(sent)
                    sent = []
                    await place(group, offset)
                    continue
                await window.acquire()
                sent.append(asyncio.ensure_future(one(group, offset)))
                await asyncio.sleep(0)  # let it go out before the next group is produced
        except BaseException:  # the producer failed, or we were cancelled: leave no task behind
            for task in sent:
                task.cancel()
            await asyncio.gather(*sent, return_exceptions=True)
            raise
        await _settle(sent)
        return results

    async def _commit_group(self, group: Sequence[Op]) -> list[Any]:
        """One multi-op under the epoch check; a write that fails alone is answered with its error and
        the others are sent again without it."""
        results: list[Any] = [None] * len(group)
        pending = list(range(len(group)))
        while pending:
            outcome = await self.zk.multi([self._check(), *(group[i] for i in pending)])
            head, rest = outcome[0], outcome[1:]
            if isinstance(head, (BadVersionError, NoNodeError)):
                raise ControllerMoved(
                    f"/controller_epoch is no longer at version {self.token.zk_version} "
                    f"(epoch {self.token.epoch}): {type(head).__name__}"
                )
            failed = [
                (i, r)
                for i, r in zip(pending, rest, strict=True)
                if isinstance(r, Exception) and not isinstance(r, (RolledBackError, RuntimeInconsistency))
            ]
            if not failed:
                for i, r in zip(pending, rest, strict=True):
                    results[i] = r
                return results
            for i, error in failed:
                results[i] = error
                log.debug(
                    "fenced write to %s failed with %s; retrying its batch without it", group[i].path, error
                )
            dropped = {i for i, _ in failed}
            pending = [i for i in pending if i not in dropped]
        return results


async def _settle(sent: Sequence[asyncio.Future[None]]) -> None:
    """Wait for every one of ``sent``; then raise the first one's failure, if any failed."""
    for outcome in await asyncio.gather(*sent, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
