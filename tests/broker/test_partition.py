"""The leader's bookkeeping: high watermark over the (maximal) ISR, caught-up times, who may join the ISR.

Pure decision logic, so the log is a stand-in that only has offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from broker.partition import Partition, PartitionError
from protocol import ErrorCode
from zkstore.znodes import TopicPartition

LEADER = 1


@dataclass
class Offsets:
    log_end_offset: int = 0
    log_start_offset: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.epochs.append((epoch, start_offset))


def leader(isr: tuple[int, ...] = (1, 2, 3), leo: int = 10, hw: int = 0, now_ms: int = 1000) -> Partition:
    p = Partition(TopicPartition("t", 0), LEADER, replicas=(1, 2, 3), leader=LEADER, leader_epoch=5, isr=isr)
    p.log = cast(Any, Offsets(log_end_offset=leo))
    p.high_watermark = hw
    p.become_leader(now_ms)
    return p


def test_becoming_leader_starts_the_epoch_at_the_log_end() -> None:
    p = leader(leo=10)
    assert cast(Offsets, p.log).epochs == [(5, 10)]
    assert p.leader_epoch_start_offset == 10 and p.pending_isr is None


def test_the_high_watermark_waits_for_every_isr_member_then_takes_the_smallest() -> None:
    p = leader(leo=10)
    assert not p.record_follower_fetch(2, 10, 2000), "broker 3's position is still unknown"
    assert p.high_watermark == 0
    assert p.record_follower_fetch(3, 7, 2000)
    assert p.high_watermark == 7
    assert not p.record_follower_fetch(3, 5, 2100), "the high watermark never goes back"
    assert p.high_watermark == 7


def test_a_replica_outside_the_isr_does_not_hold_the_high_watermark() -> None:
    p = leader(isr=(1, 2), leo=10)
    assert p.record_follower_fetch(2, 10, 2000)
    assert p.high_watermark == 10


def test_a_pending_expansion_counts_but_a_pending_shrink_does_not_yet() -> None:
    p = leader(isr=(1, 2), leo=10)
    p.record_follower_fetch(2, 10, 2000)
    p.pending_isr = (1, 2, 3)
    assert p.maximal_isr == (1, 2, 3)
    cast(Offsets, p.log).log_end_offset = 20
    p.record_follower_fetch(2, 20, 2100)
    assert p.high_watermark == 10, "broker 3, being added, has not fetched"
    p.pending_isr = (1,)
    assert p.maximal_isr == (1, 2), "a shrink takes effect only once committed"


def test_caught_up_time_follows_kafkas_rule() -> None:
    p = leader(leo=10, now_ms=0)
    p.record_follower_fetch(2, 10, 1000)  # reached the log end: caught up now
    assert p.followers[2].last_caught_up_ms == 1000
    cast(Offsets, p.log).log_end_offset = 20
    p.record_follower_fetch(2, 15, 2000)  # behind, but past the end seen at its previous fetch
    assert p.followers[2].last_caught_up_ms == 1000
    p.record_follower_fetch(2, 20, 3000)
    assert p.followers[2].last_caught_up_ms == 3000
    assert p.out_of_sync(3000 + 500, 1000) == [3], "broker 3 never fetched since leadership began"
    assert p.out_of_sync(0 + 900, 1000) == []


def test_a_follower_may_join_once_at_the_high_watermark_and_the_epoch_start() -> None:
    p = leader(isr=(1, 2), leo=10)
    p.record_follower_fetch(2, 10, 1000)
    p.record_follower_fetch(3, 9, 1000)
    assert not p.may_join_isr(3), "below the start of this leader's epoch"
    p.record_follower_fetch(3, 10, 1100)
    assert p.may_join_isr(3)
    assert not p.may_join_isr(2), "already in the ISR"


def test_a_committed_isr_from_an_earlier_leadership_is_ignored() -> None:
    p = leader(isr=(1, 2))
    p.pending_isr = (1, 2, 3)
    assert not p.isr_committed(4, (1, 2, 3), 9)
    assert p.isr == (1, 2) and p.pending_isr == (1, 2, 3)
    assert p.isr_committed(5, (1, 2, 3), 9)
    assert p.isr == (1, 2, 3) and p.partition_epoch == 9 and p.pending_isr is None


@pytest.mark.parametrize(
    ("asked", "error"),
    [(4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH), (5, None), (-1, None)],
)
def test_a_clients_leader_epoch_is_checked(asked: int, error: ErrorCode | None) -> None:
    p = leader()
    if error is None:
        p.check_leader_epoch(asked)
        return
    with pytest.raises(PartitionError) as info:
        p.check_leader_epoch(asked)
    assert info.value.code == error


def test_a_new_leader_alone_in_its_isr_advances_the_high_watermark_at_once() -> None:
    """Kafka's makeLeader ends with maybeIncrementLeaderHW: nothing else will move it."""
    p = leader(isr=(1,), leo=10, hw=4)
    assert p.high_watermark == 10


def test_a_new_leader_with_followers_keeps_the_high_watermark_until_they_fetch() -> None:
    p = leader(isr=(1, 2), leo=10, hw=4)
    assert p.high_watermark == 4
    assert p.followers[2].log_end_offset == -1


def test_a_leader_taking_a_newer_epoch_keeps_its_followers_caught_up_times() -> None:
    """Kafka resets caught-up times only for a new leader, so an epoch bump does not reprieve a
    follower that has been lagging for a while."""
    p = leader(isr=(1, 2, 3), leo=10, now_ms=1000)
    p.record_follower_fetch(2, 10, 2000)
    p.leader_epoch = 6
    p.become_leader(5000, was_leader=True)
    assert p.followers[2].last_caught_up_ms == 2000
    assert p.followers[3].last_caught_up_ms == 1000
    assert p.followers[2].log_end_offset == -1, "positions are fetched again in the new epoch"


def test_a_follower_at_the_leaders_log_end_is_in_sync_however_long_ago_it_caught_up() -> None:
    """Kafka's isCaughtUp: at the leader's log end offset, or caught up within the lag time. An idle
    partition's followers are not shrunk out."""
    p = leader(isr=(1, 2, 3), leo=10, now_ms=0)
    p.record_follower_fetch(2, 10, 100)
    p.record_follower_fetch(3, 8, 100)
    assert p.out_of_sync(100_000, 30_000) == [3]
