"""A consumer group as the coordinator keeps it: members, generation, chosen protocol, committed offsets.

Pure data and rules (no I/O, no clock of its own): the coordinator owns every group and is the one
writer; it parks members' JoinGroup and SyncGroup answers here as callbacks and calls them when a
phase completes. The state machine is Kafka's (reference §1.7):

=====================  =============================================
target state           allowed from
=====================  =============================================
PreparingRebalance     Stable, CompletingRebalance, Empty
CompletingRebalance    PreparingRebalance
Stable                 CompletingRebalance
Empty                  PreparingRebalance
Dead                   any
=====================  =============================================
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.consumer_offsets import GroupMember, GroupMetadataRecord, OffsetCommitRecord
from zkstore.znodes import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_ALLOWED_FROM: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(AssertionError):
    """A bug in the coordinator: Kafka asserts the same."""


Responder = Callable[[Any], None]
"""Answers a parked JoinGroup or SyncGroup once (the coordinator wraps a future's set_result)."""


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(name, metadata) in the member's order of preference."""
    assignment: bytes = b""
    is_new: bool = True
    """Not through a join phase yet: the new-member timeout applies instead of the session timeout."""
    awaiting_join: Responder | None = field(default=None, repr=False)
    awaiting_sync: Responder | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def answer_join(self, result: Any) -> None:
        """Answer the member's parked JoinGroup, if it has one: each parked request is answered once."""
        respond, self.awaiting_join = self.awaiting_join, None
        if respond is not None:
            respond(result)

    def answer_sync(self, result: Any) -> None:
        """Answer the member's parked SyncGroup, if it has one: each parked request is answered once."""
        respond, self.awaiting_sync = self.awaiting_sync, None
        if respond is not None:
            respond(result)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    """When the group entered its current state (persisted; drives Empty groups' offset expiry)."""
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    """KIP-394: ids handed out with MEMBER_ID_REQUIRED that have not joined with them yet."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id (KIP-345)."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of this generation that have not sent SyncGroup yet."""
    new_member_added: bool = False
    """KIP-134: a member joined during the initial delay, which is then extended."""
    offsets: dict[TopicPartition, OffsetCommitRecord] = field(default_factory=dict)
    pending_commits: Counter[TopicPartition] = field(default_factory=Counter)
    """Commits appended to the log and not committed yet, per partition."""
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetCommitRecord]] = field(default_factory=dict)
    """Producer id -> offsets its open transaction committed (TxnOffsetCommit): visible only once the
    transaction's COMMIT marker reaches this group's partition, dropped on ABORT."""

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        """A commit of ``tp`` is being written or waits for its transaction (UNSTABLE_OFFSET_COMMIT)."""
        return bool(self.pending_commits.get(tp)) or any(tp in o for o in self.pending_txn_offsets.values())

    # -- state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _ALLOWED_FROM[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, instance_id: str, new_member_id: str) -> Member:
        """KIP-345: a static member came back with a new id; the old id is fenced."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        return member

    def member_for_instance(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join is not None for m in self.members.values())

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = {name for name, _ in members[0].protocols}
        for member in members[1:]:
            common &= {name for name, _ in member.protocols}
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's check: an Empty group takes any type with a protocol; otherwise the same type and a
        protocol every current member supports."""
        if self.state is GroupState.EMPTY and not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its first protocol among those all support; the most votes win
        (ties go to the protocol first in the leader's list, a deterministic choice)."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        leader = self.members.get(self.leader_id or "")
        order = [name for name, _ in leader.protocols] if leader else sorted(votes)
        return max(votes, key=lambda name: (votes[name], -order.index(name) if name in order else 0))

    def init_next_generation(self, now_ms: int) -> None:
        """A join phase completed: the next generation, CompletingRebalance with members, else Empty."""
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
            self.pending_sync = set(self.members)
        else:
            self.protocol = None
            self.transition(GroupState.EMPTY, now_ms)
            self.pending_sync = set()
        self.new_member_added = False

    # -- persistence

    def record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataRecord:
        """The group's metadata record, with ``assignments`` (a leader's SyncGroup) or the current ones."""
        members = tuple(
            GroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata_for(self.protocol),
                assignment=(assignments or {}).get(m.member_id, m.assignment),
            )
            for m in self.members.values()
        )
        return GroupMetadataRecord(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=members,
        )

    @classmethod
    def loaded(cls, group_id: str, record: GroupMetadataRecord | None) -> Group:
        """A group read back from ``__consumer_offsets``: Stable with members, else Empty."""
        group = cls(group_id)
        if record is None:
            return group
        group.generation = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol = record.protocol
        group.leader_id = record.leader
        group.state_timestamp_ms = record.current_state_timestamp
        for m in record.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=record.protocol_type,
                protocols=[(record.protocol or "", m.subscription)],
                assignment=m.assignment,
                is_new=False,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group
