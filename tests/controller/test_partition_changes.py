"""Leadership plans read from the context: initial leadership, elections, ISR removal, the znode write."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import partition_changes as plans
from controller.context import ControllerContext
from controller.model import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    TopicPartition,
)
from controller.partition_changes import ElectionStrategy, LeadershipChange, Refused
from tests.controller.builders import context
from zkstore.ops import Create, SetData
from zkstore.znodes import LeaderIsrState, decode_leader_isr_state, partition_state_path

TP = TopicPartition("t", 0)
CONTROLLER_EPOCH = 3


def cluster(live: dict[int, int], replicas: tuple[int, ...] = (1, 2, 3)) -> ControllerContext:
    """Brokers by id -> epoch, and t-0 assigned to ``replicas`` (the builder's leadership is replaced)."""
    return context(live, {"t": [list(replicas)]}, controller_epoch=CONTROLLER_EPOCH)


def lead(
    ctx: ControllerContext,
    leader: int,
    isr: tuple[int, ...],
    *,
    leader_epoch: int = 5,
    partition_epoch: int = 9,
    written_by: int = CONTROLLER_EPOCH,
) -> None:
    """Put t-0's leadership in force, as written by the controller of epoch ``written_by``."""
    state = LeaderAndIsr(leader=leader, leader_epoch=leader_epoch, isr=isr, partition_epoch=partition_epoch)
    ctx.leadership[TP] = LeaderIsrAndControllerEpoch(state, written_by)


def change_of(result: LeadershipChange | Refused | None) -> LeadershipChange:
    assert isinstance(result, LeadershipChange), result
    return result


# -- New -> Online


def test_initial_leader_is_the_first_live_replica_and_the_isr_every_live_replica() -> None:
    ctx = cluster({2: 20, 3: 30})
    change = change_of(plans.initial_leadership(ctx, TP))
    assert change.new == LeaderAndIsr(leader=2, leader_epoch=0, isr=(2, 3), partition_epoch=0)
    assert change.recipients == (2, 3) and change.create and not change.unclean


def test_initial_leadership_skips_shutting_down_replicas() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    ctx.shutting_down = {1, 2}
    change = change_of(plans.initial_leadership(ctx, TP))
    assert (change.new.leader, change.new.isr, change.recipients) == (3, (3,), (3,))


def test_initial_leadership_is_refused_without_a_live_replica() -> None:
    ctx = cluster({4: 40})
    result = plans.initial_leadership(ctx, TP)
    assert isinstance(result, Refused) and result.tp == TP


# -- Offline/Online -> Online through the context


def test_offline_election_keeps_the_live_part_of_the_isr() -> None:
    ctx = cluster({2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3))
    change = change_of(plans.election(ctx, TP, ElectionStrategy.OFFLINE))
    assert change.new == LeaderAndIsr(leader=2, leader_epoch=6, isr=(2, 3), partition_epoch=9)
    assert change.recipients == (2, 3) and not change.create and not change.unclean
    assert change.reason == "offline election"


def test_offline_election_without_a_live_isr_member_needs_unclean_to_be_allowed() -> None:
    ctx = cluster({2: 20, 3: 30})
    lead(ctx, 1, (1,))
    assert isinstance(plans.election(ctx, TP, ElectionStrategy.OFFLINE), Refused)
    change = change_of(plans.election(ctx, TP, ElectionStrategy.OFFLINE, allow_unclean=True))
    assert (change.new.leader, change.new.isr, change.unclean) == (2, (2,), True)
    assert change.new.leader_recovery_state == LeaderRecoveryState.RECOVERING


def test_offline_election_never_picks_a_shutting_down_replica() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    ctx.shutting_down = {2}
    lead(ctx, NO_LEADER, (2, 3))
    change = change_of(plans.election(ctx, TP, ElectionStrategy.OFFLINE))
    assert (change.new.leader, change.new.isr) == (3, (3,))


def test_reassign_election_picks_the_first_target_replica_in_the_isr() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 3, (2, 3))
    change = change_of(plans.election(ctx, TP, ElectionStrategy.REASSIGN))
    assert (change.new.leader, change.new.isr, change.recipients) == (2, (2, 3), (1, 2, 3))
    assert change.new.leader_epoch == 6


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 2, (1, 2, 3))
    change = change_of(plans.election(ctx, TP, ElectionStrategy.PREFERRED))
    assert (change.new.leader, change.new.isr, change.recipients) == (1, (1, 2, 3), (1, 2, 3))
    lead(ctx, 2, (2, 3))
    refused = plans.election(ctx, TP, ElectionStrategy.PREFERRED)
    assert isinstance(refused, Refused) and "preferred" in refused.reason


def test_controlled_shutdown_election_drops_the_leaving_broker_but_still_tells_it() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    ctx.shutting_down = {1}
    lead(ctx, 1, (1, 2, 3))
    change = change_of(plans.election(ctx, TP, ElectionStrategy.CONTROLLED_SHUTDOWN))
    assert (change.new.leader, change.new.isr, change.recipients) == (2, (2, 3), (1, 2, 3))


@pytest.mark.parametrize("strategy", list(ElectionStrategy))
def test_election_is_refused_when_a_newer_controller_wrote_the_state(strategy: ElectionStrategy) -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    ctx.shutting_down = {1} if strategy is ElectionStrategy.CONTROLLED_SHUTDOWN else set()
    lead(
        ctx,
        1 if strategy is not ElectionStrategy.PREFERRED else 2,
        (1, 2, 3),
        written_by=CONTROLLER_EPOCH + 1,
    )
    result = plans.election(ctx, TP, strategy, allow_unclean=True)
    assert isinstance(result, Refused) and "newer controller epoch" in result.reason


@pytest.mark.parametrize("written_by", [CONTROLLER_EPOCH - 1, CONTROLLER_EPOCH])
def test_state_written_by_this_or_an_older_controller_can_be_changed(written_by: int) -> None:
    ctx = cluster({2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3), written_by=written_by)
    assert isinstance(plans.election(ctx, TP, ElectionStrategy.OFFLINE), LeadershipChange)


def test_election_without_leadership_information_is_refused() -> None:
    ctx = cluster({1: 10})
    del ctx.leadership[TP]
    assert isinstance(plans.election(ctx, TP, ElectionStrategy.OFFLINE), Refused)


# -- OfflineReplica: removal from the ISR


def test_leader_leaving_the_isr_leaves_the_partition_without_leader() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3))
    change = change_of(plans.remove_from_isr(ctx, TP, 1))
    assert change.new == LeaderAndIsr(leader=NO_LEADER, leader_epoch=6, isr=(2, 3), partition_epoch=9)
    assert change.recipients == (2, 3) and not change.create


def test_follower_leaving_the_isr_keeps_the_leader_and_bumps_the_leader_epoch() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3))
    change = change_of(plans.remove_from_isr(ctx, TP, 2))
    assert change.new == LeaderAndIsr(leader=1, leader_epoch=6, isr=(1, 3), partition_epoch=9)
    assert change.recipients == (1, 3)


def test_sole_isr_member_is_kept_in_the_isr_when_it_goes_offline() -> None:
    ctx = cluster({2: 20, 3: 30})
    lead(ctx, 1, (1,))
    change = change_of(plans.remove_from_isr(ctx, TP, 1))
    assert (change.new.leader, change.new.isr, change.new.leader_epoch) == (NO_LEADER, (1,), 6)


def test_isr_removal_is_not_sent_to_dead_brokers_but_is_sent_to_shutting_down_ones() -> None:
    ctx = cluster({1: 10, 2: 20, 4: 40}, replicas=(1, 2, 3, 4))
    ctx.shutting_down = {4}
    lead(ctx, 1, (1, 2, 3, 4))
    change = change_of(plans.remove_from_isr(ctx, TP, 2))
    assert change.recipients == (1, 4)  # 3 is dead, 2 is the replica going offline


def test_isr_removal_of_a_broker_outside_the_isr_changes_nothing() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 1, (1, 3))
    assert plans.remove_from_isr(ctx, TP, 2) is None
    del ctx.leadership[TP]
    assert plans.remove_from_isr(ctx, TP, 1) is None


def test_isr_removal_is_refused_when_a_newer_controller_wrote_the_state() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3), written_by=CONTROLLER_EPOCH + 1)
    assert isinstance(plans.remove_from_isr(ctx, TP, 2), Refused)


def test_leader_epoch_bump_keeps_leader_and_isr_and_tells_every_replica() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 2, (2, 3))
    change = plans.bump_leader_epoch(ctx, TP, "reassignment started")
    assert change is not None
    assert change.new == LeaderAndIsr(leader=2, leader_epoch=6, isr=(2, 3), partition_epoch=9)
    assert change.recipients == (1, 2, 3) and change.reason == "reassignment started"


# -- the znode write and its record


def test_new_partition_op_creates_the_state_znode_with_this_controllers_epoch() -> None:
    change = change_of(plans.initial_leadership(cluster({1: 10, 2: 20}), TP))
    op = change.op(controller_epoch=7)
    assert isinstance(op, Create)
    path = op.path
    assert (path, op.ephemeral, op.sequence) == (partition_state_path("t", 0), False, False)
    assert decode_leader_isr_state(op.data, path) == LeaderIsrState(
        leader=1, leader_epoch=0, controller_epoch=7, isr=(1, 2)
    )


def test_change_op_is_a_compare_and_set_on_the_version_read() -> None:
    ctx = cluster({2: 20, 3: 30})
    lead(ctx, 1, (1,), partition_epoch=12)
    change = change_of(plans.election(ctx, TP, ElectionStrategy.OFFLINE, allow_unclean=True))
    op = change.op(controller_epoch=CONTROLLER_EPOCH)
    assert isinstance(op, SetData)
    path = op.path
    assert (path, op.version) == ("/brokers/topics/t/partitions/0/state", 12)
    assert decode_leader_isr_state(op.data, path) == LeaderIsrState(
        leader=2,
        leader_epoch=6,
        controller_epoch=CONTROLLER_EPOCH,
        isr=(2,),
        leader_recovery_state=LeaderRecoveryState.RECOVERING,
    )


def test_the_ops_of_many_changes_are_each_changes_op_with_equal_states_encoded_once() -> None:
    ctx = context({1: 10, 2: 20, 3: 30}, {"a": [[1, 2, 3]] * 3, "b": [[1, 3, 2]]}, controller_epoch=7)
    ctx.shutting_down.add(1)
    shutdown = ElectionStrategy.CONTROLLED_SHUTDOWN
    changes = [change_of(plans.election(ctx, tp, shutdown)) for tp in ctx.all_partitions()]
    ops = plans.state_ops(changes, controller_epoch=7)
    assert ops == [change.op(controller_epoch=7) for change in changes]
    assert isinstance(ops[0], SetData) and isinstance(ops[1], SetData)
    assert ops[0].data is ops[1].data  # the same state (leader 2, isr 2,3): one encoding
    assert [op.path for op in ops][-1] == "/brokers/topics/b/partitions/0/state"


def test_committed_records_the_new_version_and_this_controllers_epoch() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    lead(ctx, 1, (1, 2, 3), written_by=CONTROLLER_EPOCH - 2)
    change = change_of(plans.remove_from_isr(ctx, TP, 3))
    plans.committed(ctx, change, zk_version=10)
    assert ctx.leadership[TP] == LeaderIsrAndControllerEpoch(
        replace(change.new, partition_epoch=10), CONTROLLER_EPOCH
    )


def test_committed_creation_starts_at_version_zero() -> None:
    ctx = cluster({1: 10})
    del ctx.leadership[TP]
    change = change_of(plans.initial_leadership(ctx, TP))
    plans.committed(ctx, change, zk_version=0)
    assert ctx.leadership[TP].leader_and_isr == LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,))
    assert ctx.leadership[TP].controller_epoch == CONTROLLER_EPOCH


def test_planning_never_mutates_the_context() -> None:
    ctx = cluster({1: 10, 2: 20, 3: 30})
    ctx.shutting_down = {1}
    lead(ctx, 1, (1, 2, 3))
    before = replace(ctx.leadership[TP].leader_and_isr)
    for strategy in ElectionStrategy:
        plans.election(ctx, TP, strategy, allow_unclean=True)
    plans.remove_from_isr(ctx, TP, 2)
    plans.initial_leadership(ctx, TP)
    assert ctx.leadership[TP] == LeaderIsrAndControllerEpoch(before, CONTROLLER_EPOCH)


@pytest.mark.parametrize(
    ("read_back", "written_by", "expected"),
    [
        (LeaderAndIsr(leader=1, leader_epoch=6, isr=(1,), partition_epoch=10), CONTROLLER_EPOCH, True),
        (LeaderAndIsr(leader=1, leader_epoch=6, isr=(1,), partition_epoch=11), CONTROLLER_EPOCH, False),
        (LeaderAndIsr(leader=1, leader_epoch=6, isr=(1, 2), partition_epoch=10), CONTROLLER_EPOCH, False),
        (LeaderAndIsr(leader=1, leader_epoch=6, isr=(1,), partition_epoch=10), CONTROLLER_EPOCH + 1, False),
    ],
    ids=["ours-at-the-next-version", "changed-again-since", "someone-elses", "a-newer-controllers"],
)
def test_a_refused_write_that_was_our_own_is_recognised(
    read_back: LeaderAndIsr, written_by: int, expected: bool
) -> None:
    """Kafka's checkLeaderAndIsrZkData: our write applied, its reply lost, the retry refused."""
    ctx = cluster({1: 10, 2: 20})
    change = LeadershipChange(
        TP, LeaderAndIsr(leader=1, leader_epoch=6, isr=(1,), partition_epoch=9), (1, 2), "isr shrink"
    )
    ctx.leadership[TP] = LeaderIsrAndControllerEpoch(read_back, written_by)
    assert plans.already_written(ctx, change) is expected
