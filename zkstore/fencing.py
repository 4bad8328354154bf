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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError, RuntimeInconsistency

from zkstore.aio import AsyncZooKeeper
from zkstore.ops import Check, Op, SetData, op_size
from zkstore.znodes import CONTROLLER_EPOCH

__all__ = ["ControllerMoved", "FencedWriter", "FencingToken"]

log = logging.getLogger("zkstore.fencing")

# ZooKeeper refuses requests larger than jute.maxbuffer (1 MiB - 1 by default). Stay well below it,
# leaving room for the multi-op framing and the check op.
DEFAULT_MAX_BATCH_BYTES = 900 * 1024
# Measured: multi-ops of a few hundred small writes reach ~38k ops/s; larger ones gain little.
DEFAULT_MAX_BATCH_OPS = 500

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
        current: list[int] = []
        check_cost = op_size(self._check())
        size = check_cost
        for i, op in enumerate(ops):
            cost = op_size(op)
            if cost + check_cost > self.max_batch_bytes:
                raise ValueError(f"a single write to {op.path} of {cost} bytes exceeds the request limit")
            if current and (size + cost > self.max_batch_bytes or len(current) >= self.max_batch_ops):
                groups.append(current)
                current, size = [], check_cost
            current.append(i)
            size += cost
        if current:
            groups.append(current)
        return groups

    async def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Apply ``ops``; return one slot per op: its result, or the exception that op failed with.

        Raises ControllerMoved (and applies nothing further) as soon as the epoch check fails.
        Batches of data writes only (a controlled shutdown's or a failover's new leaders) are sent
        ``IN_FLIGHT`` at a time: no batch depends on another, and a moved epoch fails every batch
        after it. Batches with creates or deletes go one after another, since a retried batch (one
        op dropped) must not land after the batch that creates or deletes under it.
        """
        results: list[Any] = [None] * len(ops)
        groups = self.batches(ops)
        if len(groups) == 1 or not all(isinstance(op, SetData) for op in ops):
            for group in groups:
                await self._commit_group(ops, group, results)
            return results
        window = asyncio.Semaphore(IN_FLIGHT)

        async def one(group: list[int]) -> None:
            async with window:
                await self._commit_group(ops, group, results)

        outcomes = await asyncio.gather(*(one(group) for group in groups), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return results

    async def _commit_group(self, ops: Sequence[Op], group: list[int], results: list[Any]) -> None:
        pending = list(group)
        while pending:
            outcome = await self.zk.multi([self._check(), *(ops[i] for i in pending)])
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
                return
            for i, error in failed:
                results[i] = error
                log.debug(
                    "fenced write to %s failed with %s; retrying its batch without it", ops[i].path, error
                )
            dropped = {i for i, _ in failed}
            pending = [i for i in pending if i not in dropped]
