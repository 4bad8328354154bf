"""The four leader election strategies, table-driven against Kafka's rules."""

from __future__ import annotations

import pytest

from controller import leader_election as elect
from controller.model import LeaderAndIsr, LeaderRecoveryState


def state(leader: int, isr: tuple[int, ...], epoch: int = 5) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=isr, partition_epoch=9)


# assignment, current (leader, isr), live, allow_unclean -> (leader, isr, recipients, unclean) or None
OFFLINE_CASES = [
    ("first live ISR replica", (1, 2, 3), (1, (1, 2, 3)), {2, 3}, False, (2, (2, 3), (2, 3), False)),
    (
        "assignment order wins over ISR order",
        (3, 2, 1),
        (1, (1, 2, 3)),
        {2, 3},
        False,
        (3, (2, 3), (3, 2), False),
    ),
    (
        "live replica outside the ISR is skipped",
        (1, 2, 3),
        (1, (1, 3)),
        {2, 3},
        False,
        (3, (3,), (2, 3), False),
    ),
    ("no live ISR replica, unclean disabled", (1, 2, 3), (1, (1,)), {2, 3}, False, None),
    ("no live ISR replica, unclean enabled", (1, 2, 3), (1, (1,)), {3, 2}, True, (2, (2,), (2, 3), True)),
    ("nothing live at all", (1, 2), (1, (1, 2)), set(), True, None),
]


@pytest.mark.parametrize(
    ("assignment", "current", "live", "unclean", "expected"),
    [c[1:] for c in OFFLINE_CASES],
    ids=[c[0] for c in OFFLINE_CASES],
)
def test_offline_partition(assignment, current, live, unclean, expected) -> None:
    result = elect.offline_partition(assignment, state(*current), live, allow_unclean=unclean)
    if expected is None:
        assert result is None
        return
    leader, isr, recipients, was_unclean = expected
    assert result is not None
    assert (result.leader_and_isr.leader, result.leader_and_isr.isr) == (leader, isr)
    assert result.recipients == recipients and result.unclean is was_unclean
    assert result.leader_and_isr.leader_epoch == 6
    assert result.leader_and_isr.partition_epoch == 9  # the CAS guard is the version read, not a new one
    assert result.leader_and_isr.leader_recovery_state == (
        LeaderRecoveryState.RECOVERING if was_unclean else LeaderRecoveryState.RECOVERED
    )


def test_preferred_replica_only_when_live_and_in_isr() -> None:
    result = elect.preferred_replica((2, 1, 3), state(1, (1, 2, 3)), {1, 2, 3})
    assert result is not None and result.leader_and_isr.leader == 2 and result.leader_and_isr.isr == (1, 2, 3)
    assert result.recipients == (2, 1, 3)
    assert elect.preferred_replica((2, 1, 3), state(1, (1, 3)), {1, 2, 3}) is None  # not in ISR
    assert elect.preferred_replica((2, 1, 3), state(1, (1, 2, 3)), {1, 3}) is None  # not live


def test_reassignment_elects_from_the_target_replicas() -> None:
    result = elect.reassign_partition((4, 5, 6), state(1, (1, 2, 5, 6)), {1, 2, 4, 5, 6})
    assert result is not None and result.leader_and_isr.leader == 5  # 4 is not in the ISR yet
    assert result.leader_and_isr.isr == (1, 2, 5, 6) and result.recipients == (4, 5, 6)
    assert elect.reassign_partition((4,), state(1, (1,)), {1, 4}) is None


def test_controlled_shutdown_moves_leadership_off_the_leaving_broker() -> None:
    result = elect.controlled_shutdown(
        (1, 2, 3), state(1, (1, 2, 3)), live_or_shutting_down={1, 2, 3}, shutting_down={1}
    )
    assert result is not None
    assert (result.leader_and_isr.leader, result.leader_and_isr.isr) == (2, (2, 3))
    assert result.recipients == (1, 2, 3)  # the leaving broker is told it no longer leads
    assert elect.controlled_shutdown((1, 2), state(1, (1,)), {1, 2}, {1}) is None  # no other ISR member
