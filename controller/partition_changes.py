"""Pure planning of leadership changes: what to write to each state znode and whom to tell.

Every function reads the ControllerContext and returns :class:`LeadershipChange` values; nothing here
writes to ZooKeeper or mutates the context. The state machines commit the changes' ``op``s in fenced
multi-ops, then record the committed ones with :func:`committed`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from controller import leader_election
from controller.context import ControllerContext
from controller.model import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from zkstore.ops import Create, Op, SetData
from zkstore.znodes import LeaderIsrState, partition_state_paths


class ElectionStrategy(enum.Enum):
    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


class LeadershipChange(NamedTuple):
    """A planned write of ``new`` to ``tp``'s state znode.

    ``new.partition_epoch`` is the znode version the write expects (compare-and-set); ``create``
    writes a state znode that does not exist yet. ``recipients`` get the LeaderAndIsr afterwards.
    A named tuple, not a frozen dataclass: as immutable, and a third of the cost to build (a
    controlled shutdown plans one per partition the broker leads).
    """

    tp: TopicPartition
    new: LeaderAndIsr
    recipients: tuple[int, ...]
    reason: str
    create: bool = False
    unclean: bool = False

    def op(self, controller_epoch: int) -> Op:
        return state_ops([self], controller_epoch)[0]


def state_ops(changes: Sequence[LeadershipChange], controller_epoch: int) -> list[Op]:
    """The state znode writes of ``changes``, in order. Built for a controlled shutdown's hundred
    thousand: each topic name is checked once, and each distinct state encoded once (most elections
    of one event end in one of a few states)."""
    paths = partition_state_paths([change.tp for change in changes])
    encoded: dict[tuple[int, int, tuple[int, ...], int], bytes] = {}
    ops: list[Op] = []
    for change, path in zip(changes, paths, strict=True):
        state = change.new
        key = (state.leader, state.leader_epoch, state.isr, state.leader_recovery_state)
        data = encoded.get(key)
        if data is None:
            data = encoded[key] = LeaderIsrState(
                state.leader, state.leader_epoch, controller_epoch, state.isr, state.leader_recovery_state
            ).encode()
        ops.append(Create(path, data) if change.create else SetData(path, data, state.partition_epoch))
    return ops


@dataclass(frozen=True, slots=True)
class Refused:
    """A partition the plan could not change, and why (logged; the partition keeps its state)."""

    tp: TopicPartition
    reason: str


def initial_leadership(context: ControllerContext, tp: TopicPartition) -> LeadershipChange | Refused:
    """New -> Online: leader = first live replica in assignment order, ISR = all live replicas."""
    live = [r for r in context.replicas(tp) if context.is_replica_online(r)]
    if not live:
        return Refused(tp, f"no live replica among {list(context.replicas(tp))}")
    state = LeaderAndIsr(leader=live[0], leader_epoch=0, isr=tuple(live))
    return LeadershipChange(tp, state, tuple(live), "new partition", create=True)


def clean_leader_available(context: ControllerContext, tp: TopicPartition) -> bool:
    """Whether a live in-sync replica is left to lead ``tp`` (else only an unclean election helps)."""
    info = context.leadership.get(tp)
    if info is None:
        return True  # nothing to elect from: the election refuses it either way
    live = context.live_broker_ids
    return any(r in live for r in info.leader_and_isr.isr if r in context.replicas(tp))


def election(
    context: ControllerContext, tp: TopicPartition, strategy: ElectionStrategy, *, allow_unclean: bool = False
) -> LeadershipChange | Refused:
    """Offline/Online -> Online with ``strategy`` (Kafka's PartitionLeaderElectionAlgorithms)."""
    info = context.leadership.get(tp)
    if info is None:
        return Refused(tp, "no leadership information")
    if info.controller_epoch > context.epoch:
        return Refused(tp, f"state written by a newer controller epoch {info.controller_epoch}")
    current = info.leader_and_isr
    replicas = context.replicas(tp)
    outcome: leader_election.Election | None
    if strategy is ElectionStrategy.CONTROLLED_SHUTDOWN:  # needs no live set: one per led partition
        outcome = leader_election.controlled_shutdown(
            replicas, current, context.brokers.keys(), context.shutting_down
        )
    elif strategy is ElectionStrategy.OFFLINE:
        live = context.live_broker_ids
        outcome = leader_election.offline_partition(replicas, current, live, allow_unclean=allow_unclean)
    elif strategy is ElectionStrategy.REASSIGN:
        outcome = leader_election.reassign_partition(replicas, current, context.live_broker_ids)
    else:
        outcome = leader_election.preferred_replica(replicas, current, context.live_broker_ids)
    if outcome is None:
        return Refused(
            tp,
            f"{strategy.value} election found no eligible leader (replicas {list(replicas)}, "
            f"isr {list(current.isr)}, live {sorted(context.live_broker_ids)})",
        )
    return LeadershipChange(tp, outcome[0], outcome[1], _ELECTION_REASONS[strategy], False, outcome[2])


_ELECTION_REASONS = {strategy: f"{strategy.value} election" for strategy in ElectionStrategy}
"""Each strategy's ``reason``, one string for all its changes."""


def remove_from_isr(
    context: ControllerContext, tp: TopicPartition, broker_id: int
) -> LeadershipChange | Refused | None:
    """OfflineReplica: take ``broker_id`` out of the ISR; if it led, the partition loses its leader.

    Like Kafka, the ISR is kept when the replica is its only member (it must stay eligible for a clean
    election when it returns). None when there is nothing to change.
    """
    info = context.leadership.get(tp)
    if info is None:
        return None
    if info.controller_epoch > context.epoch:
        return Refused(tp, f"state written by a newer controller epoch {info.controller_epoch}")
    current = info.leader_and_isr
    if broker_id not in current.isr and current.leader != broker_id:
        return None
    leader = NO_LEADER if current.leader == broker_id else current.leader
    isr = current.isr if current.isr == (broker_id,) else tuple(r for r in current.isr if r != broker_id)
    new = current.new_leader_and_isr(leader, isr, current.leader_recovery_state)
    registered = context.brokers  # live or shutting down
    recipients = tuple(r for r in context.replicas(tp) if r != broker_id and r in registered)
    return LeadershipChange(tp, new, recipients, f"replica {broker_id} offline")


def bump_leader_epoch(context: ControllerContext, tp: TopicPartition, reason: str) -> LeadershipChange | None:
    """Same leader and ISR with a new leader epoch: how reassignment makes replicas re-read the assignment."""
    info = context.leadership.get(tp)
    if info is None:
        return None
    current = info.leader_and_isr
    new = current.new_leader_and_isr(current.leader, current.isr, current.leader_recovery_state)
    return LeadershipChange(tp, new, context.replicas(tp), reason)


def already_written(context: ControllerContext, change: LeadershipChange) -> bool:
    """Whether ``change.tp``'s state, just read back after a refused write, is ``change`` itself,
    written by this controller at the version it expected: a write applied before its reply was
    lost with the connection, and refused when sent again (Kafka's checkLeaderAndIsrZkData)."""
    info = context.leadership.get(change.tp)
    if info is None or info.controller_epoch != context.epoch:
        return False
    version = 0 if change.create else change.new.partition_epoch + 1
    return info.leader_and_isr == change.new.with_partition_epoch(version)


def committed(context: ControllerContext, change: LeadershipChange, zk_version: int) -> None:
    """Record a change ZooKeeper accepted; ``zk_version`` is the state znode's new version."""
    context.leadership[change.tp] = committed_state(context, change, zk_version)


def committed_state(
    context: ControllerContext, change: LeadershipChange, zk_version: int
) -> LeaderIsrAndControllerEpoch:
    """What ``committed`` records, without recording it: worked out as each multi-op is answered,
    while later ones are at ZooKeeper, and recorded once all are."""
    return LeaderIsrAndControllerEpoch(change.new.with_partition_epoch(zk_version), context.epoch)
