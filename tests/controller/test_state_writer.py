"""The state writer over a stand-in ZooKeeper: planning overlaps the writes, recording waits for them all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError, RolledBackError

from controller import state_machines as machines
from controller.model import TopicPartition
from controller.partition_changes import ElectionStrategy, election
from controller.state_writer import PLAN_SLICE, StateWriter
from controller.stats import ControllerStats
from controller.store import ControllerStore
from daemon.eventlog import EventLog
from tests.controller.builders import context
from zkstore.fencing import ControllerMoved, FencedWriter, FencingToken
from zkstore.ops import Op, SetData

PARTITIONS = 2 * PLAN_SLICE + 100


class MultiOps:
    """A ZooKeeper that accepts every multi-op (each setData moves its znode one version on), or
    fails the fencing check from multi-op ``fenced_from`` on; ``log`` says what happened in order."""

    def __init__(self, log: list[str], fenced_from: int | None = None) -> None:
        self.log = log
        self.fenced_from = fenced_from
        self.sent = 0

    async def multi(self, ops: list[Op]) -> list[Any]:
        self.sent += 1
        self.log.append("multi")
        if self.fenced_from is not None and self.sent > self.fenced_from:
            return [BadVersionError(), *(RolledBackError() for _ in ops[1:])]
        return [True, *(SimpleNamespace(version=op.version + 1) for op in ops[1:] if isinstance(op, SetData))]


def writer_over(zk: MultiOps, partitions: int = PARTITIONS) -> tuple[StateWriter, EventLog]:
    ctx = context({1: 10, 2: 20, 3: 30}, {"t": [[1, 2, 3]] * partitions})
    ctx.shutting_down.add(1)
    store = ControllerStore(zk)  # type: ignore[arg-type]
    store.writer = FencedWriter(zk, FencingToken(ctx.epoch, 0))  # type: ignore[arg-type]
    events = EventLog(None, "controller-100", keep_recent=10 * partitions)
    return StateWriter(ctx, store, events, ControllerStats()), events


def elect_all(writer: StateWriter, log: list[str]) -> machines.Steps[machines.Written]:
    ctx = writer.context

    def plan(tp: TopicPartition) -> Any:
        log.append("plan")
        return election(ctx, tp, ElectionStrategy.CONTROLLED_SHUTDOWN)

    return machines.write_leadership(list(ctx.all_partitions()), plan, "controlled shutdown")


async def test_later_partitions_are_planned_while_the_first_writes_are_at_zookeeper() -> None:
    log: list[str] = []
    writer, events = writer_over(MultiOps(log))
    before = dict(writer.context.leadership)
    written = await writer.apply(elect_all(writer, log))
    last_plan = len(log) - 1 - log[::-1].index("plan")
    assert log.index("multi") == PLAN_SLICE < last_plan  # sent once the first slice was planned
    assert [c.tp for c in written.done] == list(writer.context.all_partitions())
    after = {tp: info.leader_and_isr for tp, info in writer.context.leadership.items()}
    assert all(
        (after[tp].leader, after[tp].partition_epoch) == (2, info.leader_and_isr.partition_epoch + 1)
        for tp, info in before.items()
    )
    lines = [e for e in events.recent if e["kind"] == "leader_and_isr_change"]
    assert [(e["topic"], e["partition"]) for e in lines] == list(writer.context.all_partitions())
    assert lines[0]["partition_epoch"] == before[TopicPartition("t", 0)].leader_and_isr.partition_epoch + 1


async def test_a_fenced_write_records_nothing_even_of_the_writes_that_took() -> None:
    """As before writes overlapped planning: the controller resigns with the context it had."""
    log: list[str] = []
    writer, events = writer_over(MultiOps(log, fenced_from=1))
    before = dict(writer.context.leadership)
    with pytest.raises(ControllerMoved):
        await writer.apply(elect_all(writer, log))
    assert writer.context.leadership == before
    assert not [e for e in events.recent if e["kind"] == "leader_and_isr_change"]
