"""The controller's small immutable values: partitions, leader/ISR states and broker registrations."""

from __future__ import annotations

from dataclasses import dataclass

from zkstore.znodes import NO_LEADER, LeaderRecoveryState, TopicPartition

__all__ = [
    "NO_LEADER",
    "LeaderAndIsr",
    "LeaderIsrAndControllerEpoch",
    "LeaderRecoveryState",
    "Reassignment",
    "TopicPartition",
]


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as stored in its state znode, with that znode's version.

    ``partition_epoch`` is the state znode's version (Kafka's zkVersion): the compare-and-set guard for
    the next write, and what brokers echo back in AlterPartition.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED

    def new_leader_and_isr(
        self, leader: int, isr: tuple[int, ...], recovery: int = LeaderRecoveryState.RECOVERED
    ) -> LeaderAndIsr:
        """The state after an election or ISR change: every such change bumps the leader epoch."""
        # The constructor, not dataclasses.replace: a controlled shutdown makes 100,000 of these.
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.partition_epoch, recovery)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(
            self.leader, self.leader_epoch, self.isr, partition_epoch, self.leader_recovery_state
        )


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition moving from ``origin`` (ORS) to ``target`` (TRS) replicas.

    While it runs the partition is assigned ``replicas`` (RS: the target first, then the origin's
    extras), so both old and new replicas keep receiving LeaderAndIsr until the target is in sync.
    """

    origin: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def replicas(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys((*self.target, *self.origin)))

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.origin)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.origin if r not in self.target)


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """Leadership plus the epoch of the controller that wrote it (a newer one means we were deposed)."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int
