"""Kafka's four partition leader election strategies, as pure functions.

Each takes the partition's assignment (replica order = preference order), its current leadership and
the relevant broker sets, and returns the new leadership with the brokers that must be told, or None
when no replica is eligible. Every election bumps the leader epoch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

from controller.model import LeaderAndIsr, LeaderRecoveryState


class Election(NamedTuple):
    """The outcome of one election: new leadership, LeaderAndIsr recipients, and whether it was unclean.

    A named tuple, not a frozen dataclass: as immutable, and a third of the cost to build (a
    controlled shutdown makes one per partition the broker leads)."""

    leader_and_isr: LeaderAndIsr
    recipients: tuple[int, ...]
    unclean: bool = False


def offline_partition(
    assignment: Sequence[int], current: LeaderAndIsr, live: Collection[int], *, allow_unclean: bool
) -> Election | None:
    """Leader: the first live replica in the ISR; else, if allowed, the first live replica (unclean).

    A clean election keeps the live part of the ISR; an unclean one restarts the ISR at the new
    leader, which may have lost data, and marks the partition as recovering.
    """
    recipients = tuple(r for r in assignment if r in live)
    leader = next((r for r in assignment if r in live and r in current.isr), None)
    if leader is not None:
        isr = tuple(r for r in current.isr if r in live)
        return Election(current.new_leader_and_isr(leader, isr), recipients)
    if allow_unclean and recipients:
        leader = recipients[0]
        return Election(
            current.new_leader_and_isr(leader, (leader,), LeaderRecoveryState.RECOVERING),
            recipients,
            unclean=True,
        )
    return None


def reassign_partition(
    target_replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int]
) -> Election | None:
    """Leader: the first replica of the reassignment target that is live and in the ISR."""
    leader = next((r for r in target_replicas if r in live and r in current.isr), None)
    if leader is None:
        return None
    return Election(current.new_leader_and_isr(leader, current.isr), tuple(target_replicas))


def preferred_replica(
    assignment: Sequence[int], current: LeaderAndIsr, live: Collection[int]
) -> Election | None:
    """Leader: the preferred (first) replica, only if it is live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred not in live or preferred not in current.isr:
        return None
    return Election(current.new_leader_and_isr(preferred, current.isr), tuple(assignment))


def controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """Leader: the first ISR replica that is alive and not shutting down; the ISR drops those leaving.

    Shutting-down brokers still receive the LeaderAndIsr, so they stop leading.
    """
    isr = current.isr
    for leader in assignment:  # loops, not generators: one of these per partition the broker leads
        if leader in live_or_shutting_down and leader in isr and leader not in shutting_down:
            break
    else:
        return None
    recipients = tuple([r for r in assignment if r in live_or_shutting_down])
    remaining = tuple([r for r in isr if r not in shutting_down])
    return Election(current.new_leader_and_isr(leader, remaining), recipients)
