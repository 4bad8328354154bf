"""One hosted partition: the state the controller gives it, its log, and, while leading, its followers.

Every field is read and written under ``lock``, which the control plane (LeaderAndIsr, StopReplica)
and the data plane (produce, fetch, the fetchers) share. The rules are Kafka's:

* the leader's high watermark is the smallest log end offset among itself and the ISR, and never
  goes back; a follower's is the leader's, capped at its own log end offset;
* a follower's log end offset is the offset it fetches from, and it is caught up when that reaches
  the leader's log end offset (the time is kept for ISR shrinking; a follower at the leader's log
  end is in sync however long ago that was);
* a replica whose position the leader does not know yet (-1) holds the high watermark where it is.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol import ErrorCode
from zkstore.znodes import TopicPartition

if TYPE_CHECKING:
    from broker.log import Log

UNKNOWN_OFFSET = -1


class PartitionError(Exception):
    """A request for this partition fails with ``code`` (nothing was changed)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass(eq=False)
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET


@dataclass(eq=False)
class Partition:
    tp: TopicPartition
    local_id: int
    """This broker."""
    replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0
    controller_epoch: int = 0
    high_watermark: int = 0
    stopped: bool = False
    """StopReplica (without delete) arrived: no longer leading or fetching until the next LeaderAndIsr."""
    pending_isr: tuple[int, ...] | None = None
    """An ISR sent to the controller and not answered yet (one AlterPartition at a time)."""
    leader_epoch_start_offset: int = UNKNOWN_OFFSET
    """The log end offset when this broker became leader: a follower must reach it to join the ISR."""
    topic_id: uuid.UUID | None = None
    """The topic's id (KIP-516) once a LeaderAndIsr v5+ named it or the log recorded it; a request
    naming another is refused with INCONSISTENT_TOPIC_ID."""
    adding_replicas: tuple[int, ...] = ()
    """Replicas a reassignment is adding: in ``replicas``, not yet counted in the replication factor."""
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    """KIP-704: 0 recovered, 1 recovering from an unclean election (a leader marks itself recovered)."""
    log: Log | None = field(default=None, repr=False)
    followers: dict[int, FollowerState] = field(default_factory=dict, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # -- roles (under lock)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id and not self.stopped and self.log is not None

    def become_leader(self, now_ms: int, *, was_leader: bool = False) -> None:
        """Start a leader epoch (Kafka's makeLeader): the epoch starts at the log end, followers'
        positions are unknown until they fetch in it, and the high watermark moves at once if the
        ISR allows (a leader alone in its ISR has nothing else to wait for).

        A new leader counts its ISR followers as caught up now and the others as never; a leader
        taking a newer epoch keeps the caught-up times it had, so a lagging follower stays lagging.
        """
        assert self.log is not None
        known = self.followers if was_leader else {}
        self.followers = {
            r: FollowerState(
                last_caught_up_ms=known[r].last_caught_up_ms
                if r in known
                else (now_ms if r in self.isr else 0)
            )
            for r in self.replicas
            if r != self.local_id
        }
        self.log.assign_epoch(self.leader_epoch, self.log.log_end_offset)
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.pending_isr = None
        self.high_watermark = min(
            max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset
        )
        self.maybe_advance_high_watermark()

    def become_follower(self) -> None:
        self.followers = {}
        self.pending_isr = None
        if self.log is not None:
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """A client's idea of the leader epoch (-1: none given) against ours (KIP-320)."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def require_leader(self) -> Log:
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert self.log is not None
        return self.log

    # -- ISR (under lock)

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus any replica a pending expansion adds: the set the high watermark and
        acks=all wait for, so nothing counts as committed on the strength of an unconfirmed shrink."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def out_of_sync(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up (Kafka's isCaughtUp): not at our log end offset, and not caught
        up within ``max_lag_ms`` (replica.lag.time.max.ms) either."""
        assert self.log is not None
        leader_end = self.log.log_end_offset
        return [
            r
            for r in self.isr
            if r != self.local_id
            and (state := self.followers.get(r)) is not None
            and state.log_end_offset != leader_end
            and now_ms - state.last_caught_up_ms > max_lag_ms
        ]

    def may_join_isr(self, replica: int) -> bool:
        """Caught up to the high watermark and to the start of this leader's epoch (Kafka's rule)."""
        state = self.followers.get(replica)
        if state is None or replica in self.maximal_isr or state.log_end_offset == UNKNOWN_OFFSET:
            return False
        return (
            state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )

    def isr_committed(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller accepted an ISR change; False if it was for an earlier leadership."""
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return False
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        return True

    # -- high watermark (under lock)

    def maybe_advance_high_watermark(self) -> bool:
        """Recompute the leader's high watermark; True if it moved."""
        assert self.log is not None
        candidate = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica == self.local_id:
                continue
            state = self.followers.get(replica)
            if state is None or state.log_end_offset == UNKNOWN_OFFSET:
                return False
            candidate = min(candidate, state.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def record_follower_fetch(self, replica: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything before it. True if the HW moved.

        Caught-up time is Kafka's: now if it reached our log end offset, else the time of its previous
        fetch if it has reached the log end offset we had then.
        """
        state = self.followers.get(replica)
        if state is None:
            return False
        assert self.log is not None
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_ms = now_ms
        return self.maybe_advance_high_watermark()

    def follower_high_watermark(self, leader_high_watermark: int) -> None:
        assert self.log is not None
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
