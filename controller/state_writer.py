"""The interpreter of the state machines' effects: ZooKeeper writes with compare-and-set retries.

``state_machines`` decides and yields what it needs written; this is the one place that commits it
(fenced multi-ops through the store), re-reads and re-plans partitions whose state znode moved,
records each committed change in the context and the event log, and counts unclean elections.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, cast

from kazoo.exceptions import BadVersionError, NodeExistsError

from controller import partition_changes as plans
from controller.context import ControllerContext
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller.partition_changes import LeadershipChange, Refused
from controller.state_machines import (
    Effect,
    EnsureZnodes,
    Steps,
    UncleanAllowed,
    WriteLeadership,
    Written,
)
from controller.stats import ControllerStats
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from placement.errors import AdminError
from zkstore.entity_configs import decode_entity_config, topic_config_path
from zkstore.ops import Create, Op

log = logging.getLogger("state.change.logger")

T = TypeVar("T")

MAX_WRITE_ATTEMPTS = 5
"""Compare-and-set rounds before a partition's change is given up (it keeps its state)."""

PLAN_SLICE = 500
"""Partitions planned at a time while earlier writes are at ZooKeeper: about one multi-op's worth."""


class StateWriter:
    def __init__(
        self,
        context: ControllerContext,
        store: ControllerStore,
        events: EventLog,
        stats: ControllerStats,
        *,
        unclean_default: bool = False,
    ) -> None:
        self.context = context
        self.store = store
        self.events = events
        self.stats = stats
        self.unclean_default = unclean_default
        """The controller's ``unclean.leader.election.enable``, for topics without an override."""

    async def apply(self, steps: Steps[T]) -> T:
        """Run a state-machine transition to its end, performing each effect it yields."""
        outcome: object = None
        while True:
            try:
                effect = steps.send(outcome)
            except StopIteration as stop:
                return cast(T, stop.value)
            outcome = await self._perform(effect)

    async def _perform(self, effect: Effect) -> object:
        if isinstance(effect, EnsureZnodes):
            await self._ensure(effect.paths)
            return None
        if isinstance(effect, UncleanAllowed):
            return await self._unclean_allowed(effect.topics)
        written = await self._write(effect)
        if effect.action is not None:
            self._report(written.refused, effect.action)
        return written

    async def _ensure(self, paths: Sequence[str]) -> None:
        """Fenced creation of structural znodes that may already exist (NodeExists is fine)."""
        for result in await self.store.commit([Create(p) for p in paths]):
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                raise result

    async def _unclean_allowed(self, topics: Sequence[str]) -> set[str]:
        """The topics whose unclean elections are allowed, from their overrides in one batched read."""
        paths = [topic_config_path(t) for t in topics]
        allowed = set()
        for topic, path, data in zip(topics, paths, await self.store.data_many(paths), strict=True):
            value = None
            if data is not None:
                try:
                    value = decode_entity_config(data, path).get("unclean.leader.election.enable")
                except AdminError as exc:
                    log.error("ignoring the configs of topic %s: %s", topic, exc)
            if value is not None and value.lower() not in ("true", "false"):
                log.error("topic %s: ignoring unclean.leader.election.enable=%s", topic, value)
                value = None
            if self.unclean_default if value is None else value.lower() == "true":
                allowed.add(topic)
        return allowed

    async def _write(self, effect: WriteLeadership) -> Written:
        """Plan, commit and record leadership changes; a stale znode version is re-read and re-planned.

        A stale version that turns out to hold our own change (a write whose reply was lost) counts
        as written. Without ``retry_stale`` (AlterPartition), a truly stale version refuses the change.
        """
        written = Written([], [])
        pending = list(effect.partitions)
        for _attempt in range(MAX_WRITE_ATTEMPTS):
            stale = await self._commit(effect, pending, written)
            if not stale:
                return written
            pending = await self._reread(stale, written)
            if not pending:
                return written
            if not effect.retry_stale:
                written.refused.extend(Refused(tp, "the state znode version changed") for tp in pending)
                return written
            log.info("%d partition states changed under us; re-planning them", len(pending))
        written.refused.extend(Refused(tp, "state znode kept changing; giving up") for tp in pending)
        return written

    async def _reread(self, stale: list[LeadershipChange], written: Written) -> list[TopicPartition]:
        """Read ``stale`` partitions' states back; record those that hold our own change, return the
        others."""
        ctx = self.context
        ctx.leadership.update(await self.store.leadership([c.tp for c in stale]))
        others = []
        recorded = []
        for change in stale:
            if plans.already_written(ctx, change):
                log.info("%s-%d: our write was applied before its reply was lost", *change.tp)
                plans.committed(ctx, change, ctx.leadership[change.tp].leader_and_isr.partition_epoch)
                written.done.append(change)
                state = ctx.leadership[change.tp].leader_and_isr
                if change.unclean:
                    self._note_unclean(change, state)
                recorded.append(self._row(change, state))
            else:
                others.append(change.tp)
        self.events.emit_many("leader_and_isr_change", recorded)
        return others

    def _planned(
        self,
        effect: WriteLeadership,
        pending: list[TopicPartition],
        written: Written,
        changes: list[LeadershipChange],
    ) -> Iterator[Op]:
        """The writes of ``pending``'s changes, planned a slice at a time as the store asks for them,
        so that planning overlaps the writes already sent. Planned changes go to ``changes``,
        refusals straight to ``written``. The context is not changed until every write is answered,
        so each plan reads what a plan made before the first write would read."""
        epoch = self.context.epoch
        for start in range(0, len(pending), PLAN_SLICE):
            planned = []
            for tp in pending[start : start + PLAN_SLICE]:
                outcome = effect.plan(tp)
                if isinstance(outcome, Refused):
                    written.refused.append(outcome)
                elif outcome is not None:
                    planned.append(outcome)
            changes += planned
            yield from plans.state_ops(planned, epoch)

    async def _commit(
        self, effect: WriteLeadership, pending: list[TopicPartition], written: Written
    ) -> list[LeadershipChange]:
        """Plan and commit ``pending`` in fenced multi-ops; record the changes that took, return the
        stale ones (a creation that found its znode is stale too: it may be our own, sent again).

        What each accepted write records (its new state and event line) is worked out as its
        multi-op is answered, while later ones are at ZooKeeper; it is recorded once all are, so
        nothing is recorded when a write fails the fencing check."""
        ctx = self.context
        changes: list[LeadershipChange] = []
        accepted: dict[int, tuple[LeaderIsrAndControllerEpoch, dict[str, Any]]] = {}

        def answered(offset: int, results: list[Any]) -> None:
            for i, result in enumerate(results, offset):
                if not isinstance(result, Exception):
                    change = changes[i]
                    info = plans.committed_state(ctx, change, 0 if change.create else result.version)
                    accepted[i] = info, self._row(change, info.leader_and_isr)

        ops = self._planned(effect, pending, written, changes)
        results = await self.store.commit_stream(ops, answered)
        stale = []
        recorded = []
        for i, (change, result) in enumerate(zip(changes, results, strict=True)):
            if isinstance(result, BadVersionError) or (change.create and isinstance(result, NodeExistsError)):
                stale.append(change)
            elif isinstance(result, Exception):
                written.refused.append(Refused(change.tp, f"ZooKeeper write failed: {type(result).__name__}"))
            else:
                info, row = accepted[i]
                ctx.leadership[change.tp] = info  # plans.committed, worked out in advance
                written.done.append(change)
                if change.unclean:
                    self._note_unclean(change, info.leader_and_isr)
                recorded.append(row)
        self.events.emit_many("leader_and_isr_change", recorded)
        return stale

    def _note_unclean(self, change: LeadershipChange, state: LeaderAndIsr) -> None:
        """Warn about and count a written change that came from an unclean election."""
        log.warning(
            "unclean election for %s-%d: leader %d may have lost committed data",
            change.tp.topic,
            change.tp.partition,
            state.leader,
        )
        self.stats.unclean_elections += 1

    def _row(self, change: LeadershipChange, state: LeaderAndIsr) -> dict[str, Any]:
        """The ``leader_and_isr_change`` line of a change written as ``state`` (emitted in bulk)."""
        return {
            "topic": change.tp.topic,
            "partition": change.tp.partition,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": state.isr,
            "partition_epoch": state.partition_epoch,
            "controller_epoch": self.context.epoch,
            "reason": change.reason,
            "unclean": change.unclean,
        }

    def _report(self, refused: Sequence[Refused], action: str) -> None:
        for r in refused:
            log.warning("%s of %s-%d failed: %s", action, r.tp.topic, r.tp.partition, r.reason)
            self.events.emit(
                "state_change_failed",
                topic=r.tp.topic,
                partition=r.tp.partition,
                action=action,
                reason=r.reason,
            )
