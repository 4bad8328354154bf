"""The rebalance state machine: how a group moves between its states, and the timers that move it.

A rebalance has two phases. The join phase (PreparingRebalance) waits for every member to rejoin,
at most the group's rebalance timeout (for a group leaving Empty, first KIP-134's initial delay,
extended while new members keep arriving); it ends with the next generation, CompletingRebalance
with the members that joined, or Empty without any. The sync phase (CompletingRebalance) waits for
the leader's assignment, writes it, and makes the group Stable; members that do not sync within the
rebalance timeout are removed. A member that stops heartbeating for its session timeout is removed
too, and a removal from a Stable or CompletingRebalance group starts a new rebalance.

Timers are named per group in the scheduler (``broker/group/timers.py``): ``join``, ``sync``,
``heartbeat:<member>`` and ``pending:<member>`` (KIP-394's ids handed out and not used yet).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

from broker.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from broker.group.messages import JoinResult, SyncResult
from broker.group.metadata_manager import GroupStore, now_ms
from broker.group.state import Group, GroupState, Member
from broker.group.timers import GroupScheduler
from daemon.eventlog import EventLog
from protocol import ErrorCode

log = logging.getLogger("broker.group")


class Rebalancer:
    def __init__(
        self,
        config: GroupConfig,
        store: GroupStore,
        scheduler: GroupScheduler,
        events: EventLog,
        on_rebalance: Callable[[], None],
    ) -> None:
        self.config = config
        self.store = store
        self.scheduler = scheduler
        self.events = events
        self.on_rebalance = on_rebalance
        """Called when a join phase completes (metrics)."""
        self._initial_delay: set[str] = set()
        """Groups in KIP-134's initial delay, which always runs its full length."""

    # ------------------------------------------------------------------ members' timers

    def schedule_heartbeat(self, group: Group, member: Member) -> None:
        """(Re)start the member's session: a new member gets Kafka's fixed five minutes to join."""
        timeout = NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms
        self.scheduler.schedule(
            group.group_id,
            f"heartbeat:{member.member_id}",
            timeout,
            partial(self._expire_member, group, member.member_id),
        )

    def cancel_heartbeat(self, group: Group, member_id: str) -> None:
        self.scheduler.cancel(group.group_id, f"heartbeat:{member_id}")

    def add_pending(self, group: Group, member_id: str, timeout_ms: int) -> None:
        """KIP-394: an id handed out with MEMBER_ID_REQUIRED, forgotten unless used in ``timeout_ms``."""
        group.pending_members.add(member_id)
        self.scheduler.schedule(
            group.group_id,
            f"pending:{member_id}",
            timeout_ms,
            partial(self._expire_pending, group, member_id),
        )

    def drop_pending(self, group: Group, member_id: str) -> bool:
        """Forget a pending id (it joined or left); False if it was not pending."""
        if member_id not in group.pending_members:
            return False
        group.pending_members.discard(member_id)
        self.scheduler.cancel(group.group_id, f"pending:{member_id}")
        return True

    def _expire_member(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or not self.store.is_current(group):
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            self.schedule_heartbeat(group, member)  # parked in a request: alive
            return
        self.remove_member(group, member_id, "session timed out", rebalance=True)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.maybe_complete_join(group)

    # ------------------------------------------------------------------ the join phase

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self.scheduler.cancel(group.group_id, "sync")
        initial = group.is_in(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        if initial:  # KIP-134: wait for more members before the first assignment
            self._initial_delay.add(group.group_id)
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self.scheduler.schedule(
                group.group_id, "join", delay, partial(self._initial_delay_over, group, delay, remaining)
            )
        else:
            self.scheduler.schedule(
                group.group_id, "join", group.rebalance_timeout_ms, partial(self._complete_join, group)
            )
        self.events.emit(
            "group_rebalance_started",
            group=group.group_id,
            generation=group.generation,
            members=len(group.members),
            reason=reason,
        )

    def _initial_delay_over(self, group: Group, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            self.scheduler.schedule(
                group.group_id,
                "join",
                next_delay,
                partial(self._initial_delay_over, group, next_delay, max(remaining - delay, 0)),
            )
            return
        self._complete_join(group)

    def maybe_complete_join(self, group: Group) -> None:
        """A non-initial join phase ends as soon as every member has rejoined."""
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and group.group_id not in self._initial_delay
            and group.has_all_members_joined()
            and self.scheduler.is_scheduled(group.group_id, "join")
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self.scheduler.cancel(group.group_id, "join")
        self._initial_delay.discard(group.group_id)
        if not group.is_in(GroupState.PREPARING_REBALANCE) or not self.store.is_current(group):
            return
        for member in [m for m in group.members.values() if m.awaiting_join is None and not m.is_static]:
            self.remove_member(group, member.member_id, "did not rejoin in time", rebalance=False)
        joined = [m for m in group.members.values() if m.awaiting_join is not None]
        leader = group.members.get(group.leader_id or "")
        if joined and (leader is None or leader.awaiting_join is None):
            group.leader_id = joined[0].member_id
        if group.members and not joined:  # only static members that have not come back yet
            self.scheduler.schedule(
                group.group_id, "join", group.rebalance_timeout_ms, partial(self._complete_join, group)
            )
            return
        group.init_next_generation(now_ms())
        self.on_rebalance()
        self.events.emit(
            "group_rebalance_completed",
            group=group.group_id,
            generation=group.generation,
            state=group.state.value,
            protocol=group.protocol,
            leader=group.leader_id,
            members=len(group.members),
        )
        if group.is_in(GroupState.EMPTY):
            self.scheduler.spawn(self._store_empty(group))
        else:
            self._start_sync_phase(group)

    async def _store_empty(self, group: Group) -> None:
        error = await self.store.store_group(group)
        if error:
            log.warning(
                "group %s: writing its empty generation %d failed: %s",
                group.group_id,
                group.generation,
                error.name,
            )

    # ------------------------------------------------------------------ the sync phase

    def _start_sync_phase(self, group: Group) -> None:
        """Every member gets the new generation (the leader with the members to assign) and has a
        rebalance timeout to send SyncGroup."""
        for member in group.members.values():
            with_members = member.member_id == group.leader_id
            member.answer_join(JoinResult.of_generation(group, member.member_id, with_members=with_members))
            member.is_new = False
            self.schedule_heartbeat(group, member)
        self.scheduler.schedule(
            group.group_id,
            "sync",
            group.rebalance_timeout_ms,
            partial(self._sync_expired, group, group.generation),
        )

    def _sync_expired(self, group: Group, generation: int) -> None:
        if group.generation != generation or not group.is_in(
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            return
        late = list(group.pending_sync)
        if not late:
            return
        for member_id in late:
            self.remove_member(group, member_id, "did not send SyncGroup in time", rebalance=False)
        self.maybe_prepare_rebalance(group, f"members {late} did not sync")

    async def complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup: write the assignment, then answer every parked SyncGroup with its
        share and make the group Stable (a failed write starts a new rebalance instead)."""
        generation = group.generation
        for member_id in group.members:
            assignments.setdefault(member_id, b"")
        error = await self.store.store_group(group, assignments)
        if group.generation != generation or not group.is_in(GroupState.COMPLETING_REBALANCE):
            return  # a rebalance or an unload overtook the write; its members were answered then
        if error:
            for member in group.members.values():
                member.answer_sync(SyncResult(error))
            self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member_id, member in group.members.items():
            member.assignment = assignments.get(member_id, b"")
            member.answer_sync(
                SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment)
            )
            self.schedule_heartbeat(group, member)
        group.transition(GroupState.STABLE, now_ms())
        self.events.emit(
            "group_stable", group=group.group_id, generation=generation, members=len(group.members)
        )

    # ------------------------------------------------------------------ members leaving, groups going

    def remove_member(self, group: Group, member_id: str, reason: str, *, rebalance: bool) -> None:
        """The member's parked requests get UNKNOWN_MEMBER_ID; with ``rebalance``, the others rebalance
        (or the join phase they are in may now be complete)."""
        member = group.remove(member_id)
        if member is None:
            return
        self.cancel_heartbeat(group, member_id)
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self.events.emit(
            "group_member_removed",
            group=group.group_id,
            member_id=member_id,
            group_instance_id=member.group_instance_id,
            reason=reason,
            generation=group.generation,
        )
        if not rebalance:
            return
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.maybe_complete_join(group)

    def close(self, group: Group) -> None:
        """The group leaves this coordinator (unloaded or deleted): its timers stop and its parked
        requests get NOT_COORDINATOR, so their clients look for the new coordinator."""
        self._initial_delay.discard(group.group_id)
        self.scheduler.cancel_group(group.group_id)
        _answer_not_coordinator(group)

    def shutdown(self, groups: Iterable[Group]) -> None:
        self.scheduler.cancel_all()
        for group in groups:
            _answer_not_coordinator(group)


def _answer_not_coordinator(group: Group) -> None:
    for member in group.members.values():
        member.answer_join(JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
        member.answer_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
