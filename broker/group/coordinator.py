"""Kafka's GroupCoordinator: the membership protocol (join, sync, heartbeat, leave) over a group's state.

Each request is judged against its group's state (``broker/group/state.py``: Empty,
PreparingRebalance, CompletingRebalance, Stable, Dead) and answered at once, or parked until the
rebalance phase it waits for completes (``broker/group/rebalance.py`` moves groups between states,
driven by their timers). OffsetCommit is judged here too, since only a current member of the current
generation may commit; storage is the metadata manager's (``broker/group/metadata_manager.py``),
reached through its narrow ``GroupStore``.

Every group, member and timer belongs to the broker's event loop, the one writer; the request
handlers (on handler threads) submit coroutines and wait for their futures, the control plane
submits ``on_election`` / ``on_resignation``. As in Kafka, this class is also the broker's one entry
point to its groups: ownership, OffsetFetch, expiry and the admin requests pass through to the
metadata manager and ``broker/group/admin.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

from broker.group.admin import GroupAdmin, GroupSummary
from broker.group.config import GroupConfig
from broker.group.messages import JoinRequest, JoinResult, SyncResult
from broker.group.metadata_manager import (
    GroupMetadataManager,
    GroupStore,
    OffsetFetchResult,
    OffsetsLog,
    now_ms,
)
from broker.group.rebalance import Rebalancer
from broker.group.state import Group, GroupState, Member
from broker.group.timers import GroupScheduler
from broker.group.txn_offsets import TransactionalOffsets
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.consumer_offsets import OffsetCommitRecord
from zkstore.znodes import TopicPartition

T = TypeVar("T")


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        config: GroupConfig,
        offsets_log: OffsetsLog,
        events: EventLog,
        *,
        partition_count: int | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.events = events
        self.scheduler = GroupScheduler()
        self.manager = GroupMetadataManager(
            config,
            offsets_log,
            events,
            self.scheduler,
            partition_count=partition_count or config.offsets_topic_num_partitions,
            on_group_loaded=self._on_group_loaded,
            on_group_removed=self._on_group_removed,
        )
        self.store: GroupStore = self.manager
        """The manager as the protocol sees it: the one interface its decisions use."""
        self.rebalance = Rebalancer(config, self.store, self.scheduler, events, lambda: self.on_rebalance())
        self.admin = GroupAdmin(self.manager)
        self.transactional = TransactionalOffsets(self.manager)
        """TxnOffsetCommit's offsets, and their end when the transaction's marker arrives."""
        self.on_rebalance: Callable[[], None] = lambda: None
        """Called when a join phase completes (metrics)."""

    # ------------------------------------------------------------------ the broker's entry points

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.scheduler.bind(loop)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.scheduler.loop

    @property
    def partition_count(self) -> int:
        """``__consumer_offsets``' partition count, fixed at start-up (a group never moves)."""
        return self.manager.partition_count

    @partition_count.setter
    def partition_count(self, count: int) -> None:
        self.manager.partition_count = count

    def partition_of(self, group_id: str) -> int:
        return self.manager.partition_of(group_id)

    @property
    def groups(self) -> dict[str, Group]:
        return self.manager.groups

    @property
    def owned(self) -> set[int]:
        return self.manager.owned

    @property
    def loading(self) -> set[int]:
        return self.manager.loading

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker newly leads ``__consumer_offsets-partition`` (any thread): load its groups."""
        self.manager.on_election(partition, epoch)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """No longer the leader (any thread): forget the partition's groups."""
        self.manager.on_resignation(partition, epoch)

    def on_transaction_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is written in ``__consumer_offsets-partition`` (any thread)."""
        self.loop.call_soon_threadsafe(self.transactional.complete, partition, producer_id, commit)

    async def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, *, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchResult]]:
        """OffsetFetch needs no membership: the manager answers."""
        return await self.manager.fetch_offsets(group_id, partitions, require_stable=require_stable)

    def expire_offsets(self) -> int:
        return self.manager.expire_offsets()

    async def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        return await self.admin.list_groups(states)

    async def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        return await self.admin.describe_group(group_id)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        return await self.admin.delete_groups(group_ids)

    def shutdown(self) -> None:
        self.rebalance.shutdown(self.manager.groups.values())

    def _on_group_loaded(self, group: Group) -> None:
        """Kafka's onGroupLoaded: members must heartbeat within a session of the failover."""
        for member in group.members.values():
            self.rebalance.schedule_heartbeat(group, member)

    def _on_group_removed(self, group: Group) -> None:
        """Kafka's onGroupUnloaded (and a deletion): timers stop, parked requests are answered."""
        self.rebalance.close(group)

    # ------------------------------------------------------------------ checks

    def _member_group(
        self, group_id: str, member_id: str, instance_id: str | None, *, loading: ErrorCode
    ) -> Group | ErrorCode:
        """The group of a current member, or the error SyncGroup and Heartbeat answer (``loading``
        while its partition loads: each of them answers that differently)."""
        error = self.store.status_error(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return loading
        if error:
            return error
        group = self.store.group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self._member_error(group, member_id, instance_id) or group

    @staticmethod
    def _member_error(group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateCurrentMember: a static member's id must be the one mapped to its instance."""
        if instance_id is not None:
            mapped = group.member_for_instance(instance_id)
            if mapped is not None and mapped != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            if mapped is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(self, request: JoinRequest) -> JoinResult:
        error = self.store.status_error(request.group_id)
        if error:
            return JoinResult(error, request.member_id)
        config = self.config
        if (
            not config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= (config.group_max_session_timeout_ms)
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        group = self.store.group(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self.store.add_group(Group(request.group_id, state_timestamp_ms=now_ms()))
        if group.is_in(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
        if not self._has_room(group, request.member_id):
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id)
        if not group.supports_protocols(request.protocol_type, [n for n, _ in request.protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if not request.member_id:
            return await self._join_new_member(group, request)
        return await self._join_known_member(group, request)

    def _has_room(self, group: Group, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            waiting = group.members.get(member_id)
            return (waiting is not None and waiting.awaiting_join is not None) or (
                group.awaiting_join_count() < limit
            )
        return member_id in group.members or len(group.members) < limit

    async def _join_new_member(self, group: Group, request: JoinRequest) -> JoinResult:
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        instance_id = request.group_instance_id
        if instance_id is not None:
            if group.member_for_instance(instance_id) is not None:
                return await self._replace_static_member(group, request, member_id)
            return await self._add_and_rebalance(group, request, member_id)
        if request.require_known_member_id:
            self.rebalance.add_pending(group, member_id, request.session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return await self._add_and_rebalance(group, request, member_id)

    async def _join_known_member(self, group: Group, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if self.rebalance.drop_pending(group, member_id):
            return await self._add_and_rebalance(group, request, member_id)
        error = self._member_error(group, member_id, request.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return await self._update_and_wait(group, member, request, rebalance=False)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.same_protocols(request.protocols):
                return JoinResult.of_generation(group, member_id, with_members=member_id == group.leader_id)
            return await self._update_and_wait(group, member, request, rebalance=True)
        if group.is_in(GroupState.STABLE):
            if member_id == group.leader_id or not member.same_protocols(request.protocols):
                return await self._update_and_wait(group, member, request, rebalance=True)
            return JoinResult.of_generation(group, member_id, with_members=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    async def _replace_static_member(self, group: Group, request: JoinRequest, member_id: str) -> JoinResult:
        assert request.group_instance_id is not None
        old_id = group.member_for_instance(request.group_instance_id)
        old = group.members[old_id] if old_id else None
        unchanged = old is not None and old.same_protocols(request.protocols)
        if old is not None:
            old.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old.member_id))
            old.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            self.rebalance.cancel_heartbeat(group, old.member_id)
        previous_leader = group.leader_id
        member = group.replace_static(request.group_instance_id, member_id)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.events.emit(
            "group_static_member_replaced",
            group=group.group_id,
            group_instance_id=request.group_instance_id,
            old_member_id=old_id,
            member_id=member_id,
        )
        if group.is_in(GroupState.STABLE) and unchanged:
            error = await self.store.store_group(group)
            if error:
                group.replace_static(request.group_instance_id, old_id or member_id)
                return JoinResult(error, member_id)
            self.rebalance.schedule_heartbeat(group, member)
            result = JoinResult.of_generation(group, member.member_id, with_members=False)
            # Before KIP-814 the answer names the old leader, so the returning member does not reassign.
            result.leader = old_id if previous_leader == old_id and old_id else (group.leader_id or "")
            return result
        return await self._update_and_wait(
            group, member, request, rebalance=group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        )

    async def _add_and_rebalance(self, group: Group, request: JoinRequest, member_id: str) -> JoinResult:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=list(request.protocols),
        )
        group.add(member)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        self.rebalance.schedule_heartbeat(group, member)  # a new member: the new-member join timeout
        waiter = self._park_join(member)
        self.rebalance.maybe_prepare_rebalance(group, f"member {member_id} joined")
        self.rebalance.maybe_complete_join(group)
        return await waiter

    async def _update_and_wait(
        self, group: Group, member: Member, request: JoinRequest, *, rebalance: bool
    ) -> JoinResult:
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        waiter = self._park_join(member)
        if rebalance:
            self.rebalance.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self.rebalance.maybe_complete_join(group)
        return await waiter

    def _park_join(self, member: Member) -> asyncio.Future[JoinResult]:
        waiter: asyncio.Future[JoinResult] = self.loop.create_future()
        member.answer_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))  # a duplicate join
        member.awaiting_join = _resolver(waiter)
        return waiter

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        found = self._syncing_group(group_id, generation, member_id, instance_id, protocol_type, protocol)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        group = found
        group.pending_sync.discard(member_id)
        member = group.members[member_id]
        if group.is_in(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_in(GroupState.STABLE):
            self.rebalance.schedule_heartbeat(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment)
        waiter: asyncio.Future[SyncResult] = self.loop.create_future()
        member.awaiting_sync = _resolver(waiter)
        if member_id == group.leader_id:
            self.scheduler.spawn(self.rebalance.complete_sync(group, dict(assignments)))
        return await waiter

    def _syncing_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol: str | None,
    ) -> Group | ErrorCode:
        # old clients do not know error 14
        found = self._member_group(group_id, member_id, instance_id, loading=ErrorCode.REBALANCE_IN_PROGRESS)
        if isinstance(found, ErrorCode):
            return found
        group = found
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol is not None and protocol != group.protocol
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return group

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup

    async def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        # while loading, the member's session is judged once loaded
        found = self._member_group(group_id, member_id, instance_id, loading=ErrorCode.NONE)
        if isinstance(found, ErrorCode):
            return found
        group = found
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self.rebalance.schedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per (member id, instance id) leaving)."""
        error = self.store.status_error(group_id)
        if error:
            return error, []
        group = self.store.group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.member_for_instance(instance_id) or ""
                if not member_id:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
            if self.rebalance.drop_pending(group, member_id):
                self.rebalance.maybe_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            error = self._member_error(group, member_id, instance_id)
            if not error:
                self.rebalance.remove_member(group, member_id, "left the group", rebalance=True)
            errors.append(error)
        return ErrorCode.NONE, errors

    # ------------------------------------------------------------------ OffsetCommit

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitRecord],
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleCommitOffsets: the committer is judged here, the offsets stored by the manager."""
        found = self._committing_group(group_id, generation, member_id, instance_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(offsets, found)
        group = found
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
            self.rebalance.schedule_heartbeat(group, group.members[member_id])
        return await self.store.store_offsets(group, offsets)

    def _committing_group(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> Group | ErrorCode:
        error = self.store.status_error(group_id)
        if error:
            return error
        group = self.store.group(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.ILLEGAL_GENERATION
            # a consumer that assigns partitions itself: its group exists only to hold offsets
            return self.store.add_group(Group(group_id, state_timestamp_ms=now_ms()))
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return group
        error = self._committer_error(group, generation, member_id, instance_id)
        if error:
            return error
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return group

    def _committer_error(
        self, group: Group, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """A member's commit must come from a current member of the current generation; a commit with
        no generation and no member (a consumer assigning itself) only to a group without members."""
        if generation >= 0 or member_id or instance_id is not None:
            error = self._member_error(group, member_id, instance_id)
            if error:
                return error
            return ErrorCode.ILLEGAL_GENERATION if generation != group.generation else ErrorCode.NONE
        return ErrorCode.UNKNOWN_MEMBER_ID if group.members else ErrorCode.NONE


def _resolver(waiter: asyncio.Future[T]) -> Callable[[T], None]:
    """Answers a parked request once; a waiter already done (its client went away) is left alone."""

    def resolve(result: T) -> None:
        if not waiter.done():
            waiter.set_result(result)

    return resolve
