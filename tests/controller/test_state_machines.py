"""The state machines driven by hand, with no ZooKeeper: the effects they yield, and what they do with
the outcomes sent back (the shell's StateWriter does the same against a real server)."""

from __future__ import annotations

import pytest

from controller import partition_changes as plans
from controller import state_machines as machines
from controller.context import ControllerContext
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller.partition_changes import ElectionStrategy, Refused
from controller.request_batch import EpochProtocol, RequestBatch
from controller.state_machines import EnsureZnodes, Steps, Unclean, UncleanAllowed, WriteLeadership, Written
from controller.state_tables import PartitionState, ReplicaState
from tests.controller.builders import context
from zkstore import znodes

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def batch_for(ctx: ControllerContext) -> RequestBatch:
    return RequestBatch(ctx, EpochProtocol.MAX_BROKER_EPOCH.wire, "PLAINTEXT")


def commit_all(ctx: ControllerContext, effect: WriteLeadership) -> Written:
    """What the writer does when every planned change commits: record it at the next znode version."""
    done, refused = [], []
    for tp in effect.partitions:
        outcome = effect.plan(tp)
        if isinstance(outcome, Refused):
            refused.append(outcome)
        elif outcome is not None:
            plans.committed(ctx, outcome, 0 if outcome.create else outcome.new.partition_epoch + 1)
            done.append(outcome)
    return Written(done, refused)


def run(ctx: ControllerContext, steps: Steps[object]) -> tuple[list[object], object]:
    """Drive ``steps`` to the end, committing every write; the effects seen and the result."""
    return run_from(ctx, steps, None)


def test_a_new_partition_asks_for_its_parent_znodes_then_its_initial_leadership() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2]]})
    del ctx.leadership[T0]
    ctx.partition_states[T0] = PartitionState.NEW
    batch = batch_for(ctx)
    steps = machines.partitions_to(ctx, batch, [T0], PartitionState.ONLINE)
    assert next(steps) == EnsureZnodes((znodes.partitions_path("t"), znodes.partition_path("t", 0)))
    write = steps.send(None)
    assert isinstance(write, WriteLeadership)
    assert write.partitions == (T0,) and write.action == "initial leader election" and write.retry_stale
    assert ctx.partition_states[T0] is PartitionState.NEW, "nothing changes before the write is answered"
    with pytest.raises(StopIteration) as stop:
        steps.send(commit_all(ctx, write))
    assert stop.value.value == []
    assert ctx.partition_states[T0] is PartitionState.ONLINE
    assert ctx.leadership[T0].leader_and_isr.isr == (1, 2)
    assert set(batch.leader_and_isr) == {1, 2}
    assert all(entry[T0]["is_new"] for entry in batch.leader_and_isr.values())


def test_a_refused_election_keeps_the_partition_offline_and_is_returned() -> None:
    ctx = context({2: 20}, {"t": [[1, 3]]})  # no replica is live
    ctx.partition_states[T0] = PartitionState.OFFLINE
    batch = batch_for(ctx)
    effects, refused = run(ctx, machines.partitions_to(ctx, batch, [T0], PartitionState.ONLINE))
    assert [type(e) for e in effects] == [WriteLeadership]
    assert isinstance(refused, list) and [r.tp for r in refused] == [T0]
    assert ctx.partition_states[T0] is PartitionState.OFFLINE and batch.empty


def test_an_illegal_transition_yields_nothing_and_changes_nothing() -> None:
    ctx = context({1: 10}, {"t": [[1]]})
    ctx.partition_states[T0] = PartitionState.ONLINE
    batch = batch_for(ctx)
    effects, refused = run(ctx, machines.partitions_to(ctx, batch, [T0], PartitionState.NEW))
    assert effects == [] and refused == []
    assert ctx.partition_states[T0] is PartitionState.ONLINE and batch.empty


def test_offline_replicas_get_stop_replica_and_one_isr_write_per_broker() -> None:
    ctx = context({1: 10, 2: 20, 3: 30}, {"t": [[1, 2, 3], [2, 3, 1]]})
    for tp in (T0, T1):
        for r in ctx.replicas(tp):
            ctx.replica_states[tp, r] = ReplicaState.ONLINE
    batch = batch_for(ctx)
    replicas = [(T0, 2), (T1, 2), (T0, 3)]
    effects, _ = run(ctx, machines.replicas_to(ctx, batch, replicas, ReplicaState.OFFLINE))
    assert [(e.partitions, e.action) for e in effects if isinstance(e, WriteLeadership)] == [
        ((T0, T1), "removing replica 2 from the ISR"),
        ((T0,), "removing replica 3 from the ISR"),
    ]
    assert ctx.leadership[T0].leader_and_isr.isr == (1,)
    assert ctx.leadership[T1].leader_and_isr.leader == -1, "t-1 was led by 2"
    assert {(tp, b) for b, parts in batch.stop_replica.items() for tp in parts} == set(replicas)
    assert all(ctx.replica_states[r] is ReplicaState.OFFLINE for r in replicas)


def test_a_partitions_leader_cannot_become_a_new_replica() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2]]})
    batch = batch_for(ctx)
    effects, _ = run(ctx, machines.replicas_to(ctx, batch, [(T0, 1), (T0, 2)], ReplicaState.NEW))
    assert effects == []
    assert (T0, 1) not in ctx.replica_states and ctx.replica_states[T0, 2] is ReplicaState.NEW
    assert set(batch.leader_and_isr) == {2}


def test_controlled_shutdown_election_moves_leadership_off_the_broker() -> None:
    ctx = context({1: 10, 2: 20}, {"t": [[1, 2]]})
    ctx.partition_states[T0] = PartitionState.ONLINE
    ctx.shutting_down.add(1)
    batch = batch_for(ctx)
    steps = machines.partitions_to(
        ctx, batch, [T0], PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
    )
    effects, refused = run(ctx, steps)
    assert refused == [] and [type(e) for e in effects] == [WriteLeadership]
    assert ctx.leadership[T0].leader_and_isr.leader == 2
    assert 1 not in ctx.leadership[T0].leader_and_isr.isr


def offline_without_isr() -> tuple[ControllerContext, TopicPartition, TopicPartition]:
    """t-0 keeps a live in-sync replica (2); u-0's only in-sync replica (1) is gone, 3 is live."""
    ctx = context({2: 20, 3: 30}, {"t": [[1, 2]], "u": [[1, 3]]})
    u0 = TopicPartition("u", 0)
    info = ctx.leadership[u0]
    stuck = LeaderAndIsr(leader=-1, leader_epoch=2, isr=(1,), partition_epoch=5)
    ctx.leadership[u0] = LeaderIsrAndControllerEpoch(stuck, info.controller_epoch)
    for tp in (T0, u0):
        ctx.partition_states[tp] = PartitionState.OFFLINE
    return ctx, T0, u0


@pytest.mark.parametrize("allowed", [{"u"}, set()])
def test_the_topic_config_is_asked_only_for_partitions_without_a_live_in_sync_replica(
    allowed: set[str],
) -> None:
    ctx, t0, u0 = offline_without_isr()
    steps = machines.partitions_to(
        ctx, batch_for(ctx), [t0, u0], PartitionState.ONLINE, unclean=Unclean.BY_CONFIG
    )
    assert next(steps) == UncleanAllowed(("u",))
    _, refused = run_from(ctx, steps, allowed)
    assert ctx.leadership[t0].leader_and_isr.leader == 2
    if allowed:
        assert refused == [] and ctx.leadership[u0].leader_and_isr.isr == (3,)
    else:
        assert isinstance(refused, list) and [r.tp for r in refused] == [u0]


@pytest.mark.parametrize("unclean", [Unclean.NEVER, Unclean.ALWAYS])
def test_never_and_always_need_no_config(unclean: Unclean) -> None:
    ctx, t0, u0 = offline_without_isr()
    effects, _ = run(
        ctx, machines.partitions_to(ctx, batch_for(ctx), [t0, u0], PartitionState.ONLINE, unclean=unclean)
    )
    assert not any(isinstance(e, UncleanAllowed) for e in effects)
    assert (ctx.leadership[u0].leader_and_isr.leader == 3) is (unclean is Unclean.ALWAYS)


def run_from(ctx: ControllerContext, steps: Steps[object], answer: object) -> tuple[list[object], object]:
    """Drive ``steps`` to the end, sending ``answer`` first (for an effect already taken, or None to
    start), committing every write; the effects seen and the result."""
    seen: list[object] = []
    outcome = answer
    while True:
        try:
            effect = steps.send(outcome)
        except StopIteration as stop:
            return seen, stop.value
        seen.append(effect)
        outcome = commit_all(ctx, effect) if isinstance(effect, WriteLeadership) else None
