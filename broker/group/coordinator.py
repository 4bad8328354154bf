"""The group coordinator: Kafka's classic rebalance protocol and offset storage, on the event loop.

Every group, member and timer belongs to the broker's event loop, the one writer; the request
handlers (on handler threads) submit coroutines and wait for their futures, the control plane
submits ``on_election`` / ``on_resignation``. Writes go to the local leader of the group's
``__consumer_offsets`` partition in Kafka's record formats, appended in the order they were decided
(on the loop, so two commits of one group never swap in the log) and answered only once the
partition's ISR has them (acks=all), as Kafka's coordinator does.

Which partition a group lives in is Kafka's ``abs(hashCode) % offsets.topic.num.partitions`` with
the partition count fixed at start-up. While a partition loads, its groups answer
COORDINATOR_LOAD_IN_PROGRESS; a partition this broker does not lead answers NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from broker.group.loader import LoadedPartition
from broker.group.state import Group, GroupState, Member
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.consumer_offsets import (
    OffsetCommitRecord,
    group_key,
    group_metadata_record,
    offset_commit_record,
    offset_key,
    partition_for,
)
from zkstore.znodes import TopicPartition

log = logging.getLogger("broker.group")

Records = list[tuple[bytes, bytes | None]]


class OffsetsLog(Protocol):
    """The coordinator's access to the ``__consumer_offsets`` partitions this broker hosts."""

    async def append(self, partition: int, records: Records, *, replicated: bool) -> ErrorCode:
        """Append as leader; with ``replicated``, wait until the ISR has the records (or time out)."""
        ...

    async def load(self, partition: int) -> LoadedPartition:
        """Read the partition's log from its start to its end (off the loop)."""
        ...


# Log-append errors as each write reports them (reference §1.6).
_GROUP_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
_COMMIT_WRITE_ERRORS = {
    **_GROUP_WRITE_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    """JoinGroup v4+ (KIP-394): a new dynamic member first gets its id with MEMBER_ID_REQUIRED."""


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    """For the leader only: (member id, instance id, metadata for the chosen protocol)."""


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class OffsetFetchResult:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


NO_OFFSET = OffsetFetchResult(-1, -1, "")


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[dict[str, Any]]


def now_ms() -> int:
    """Wall-clock milliseconds: what commit and state timestamps in ``__consumer_offsets`` hold."""
    return int(time.time() * 1000)


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
        self.offsets_log = offsets_log
        self.events = events
        self.partition_count = partition_count or config.offsets_topic_num_partitions
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._initial_delay: set[str] = set()
        """Groups in KIP-134's initial delay, which always runs its full length."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_rebalance: Callable[[], None] = lambda: None
        """Called when a join phase completes (metrics)."""

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the coordinator is not bound to an event loop"
        return self._loop

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    # ------------------------------------------------------------------ ownership (LeaderAndIsr)

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker newly leads ``__consumer_offsets-partition`` (any thread): load its groups."""
        self.loop.call_soon_threadsafe(self._start_load, partition, epoch)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """No longer the leader (any thread): forget the partition's groups."""
        self.loop.call_soon_threadsafe(self._unload, partition, epoch)

    def _newer_epoch(self, partition: int, epoch: int | None) -> bool:
        known = self._epochs.get(partition)
        if epoch is None:
            return True
        if known is not None and epoch < known:
            return False
        self._epochs[partition] = epoch
        return True

    def _start_load(self, partition: int, epoch: int) -> None:
        if not self._newer_epoch(partition, epoch) or partition in self.owned or partition in self.loading:
            return
        self.loading.add(partition)
        task = self.loop.create_task(self._load(partition, epoch), name=f"load-offsets-{partition}")
        task.add_done_callback(_log_failure)

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            loaded = await self.offsets_log.load(partition)
        except Exception:
            log.exception("loading __consumer_offsets-%d failed; its groups start empty", partition)
            loaded = LoadedPartition()
        if partition not in self.loading or self._epochs.get(partition) != epoch:
            return  # resigned (or re-elected) while loading: this result is stale
        self.loading.discard(partition)
        self.owned.add(partition)
        for group_id in loaded.group_ids():
            group = Group.loaded(group_id, loaded.groups.get(group_id))
            group.offsets = dict(loaded.offsets.get(group_id, {}))
            self.groups[group_id] = group
            for member in group.members.values():  # members must heartbeat within a session of the failover
                self._schedule_heartbeat(group, member)
        self.events.emit(
            "coordinator_loaded",
            partition=partition,
            leader_epoch=epoch,
            groups=len(loaded.group_ids()),
            offsets=sum(len(o) for o in loaded.offsets.values()),
            records=loaded.records,
            skipped=loaded.skipped,
            load_ms=round((time.monotonic() - started) * 1000, 1),
        )

    def _unload(self, partition: int, epoch: int | None) -> None:
        if not self._newer_epoch(partition, epoch):
            return
        was_owned = partition in self.owned or partition in self.loading
        self.owned.discard(partition)
        self.loading.discard(partition)
        unloaded = [g for g in self.groups.values() if self.partition_of(g.group_id) == partition]
        for group in unloaded:
            self._cancel_timers(group)
            for member in group.members.values():
                _answer_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                _answer_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            group.transition(GroupState.DEAD, now_ms())
            del self.groups[group.group_id]
        if was_owned:
            self.events.emit(
                "coordinator_unloaded", partition=partition, leader_epoch=epoch, groups=len(unloaded)
            )

    # ------------------------------------------------------------------ checks

    def _status(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: the checks every group API makes first."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_of(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def _member_group(
        self, group_id: str, member_id: str, instance_id: str | None, *, loading: ErrorCode
    ) -> Group | ErrorCode:
        """The group of a current member, or the error SyncGroup and Heartbeat answer (``loading``
        while its partition loads: each of them answers that differently)."""
        error = self._status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return loading
        if error:
            return error
        group = self.groups.get(group_id)
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
        error = self._status(request.group_id)
        if error:
            return JoinResult(error, request.member_id)
        config = self.config
        if (
            not config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= (config.group_max_session_timeout_ms)
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self.groups[request.group_id] = Group(request.group_id, state_timestamp_ms=now_ms())
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
            group.pending_members.add(member_id)
            self._schedule(
                group,
                f"pending:{member_id}",
                request.session_timeout_ms,
                self._expire_pending,
                group,
                member_id,
            )
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return await self._add_and_rebalance(group, request, member_id)

    async def _join_known_member(self, group: Group, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel(group, f"pending:{member_id}")
            return await self._add_and_rebalance(group, request, member_id)
        error = self._member_error(group, member_id, request.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return await self._update_and_wait(group, member, request, rebalance=False)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.same_protocols(request.protocols):
                return self._current_generation(group, member, with_members=member_id == group.leader_id)
            return await self._update_and_wait(group, member, request, rebalance=True)
        if group.is_in(GroupState.STABLE):
            if member_id == group.leader_id or not member.same_protocols(request.protocols):
                return await self._update_and_wait(group, member, request, rebalance=True)
            return self._current_generation(group, member, with_members=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    async def _replace_static_member(self, group: Group, request: JoinRequest, member_id: str) -> JoinResult:
        assert request.group_instance_id is not None
        old_id = group.member_for_instance(request.group_instance_id)
        old = group.members[old_id] if old_id else None
        unchanged = old is not None and old.same_protocols(request.protocols)
        if old is not None:
            _answer_join(old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old.member_id))
            _answer_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            self._cancel(group, f"heartbeat:{old.member_id}")
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
            error = await self._store_group(group)
            if error:
                group.replace_static(request.group_instance_id, old_id or member_id)
                return JoinResult(error, member_id)
            self._schedule_heartbeat(group, member)
            result = self._current_generation(group, member, with_members=False)
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
        self._schedule(
            group, f"heartbeat:{member_id}", NEW_MEMBER_JOIN_TIMEOUT_MS, self._expire_member, group, member_id
        )
        waiter = self._park_join(member)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._maybe_complete_join(group)
        return await waiter

    async def _update_and_wait(
        self, group: Group, member: Member, request: JoinRequest, *, rebalance: bool
    ) -> JoinResult:
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        waiter = self._park_join(member)
        if rebalance:
            self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._maybe_complete_join(group)
        return await waiter

    def _park_join(self, member: Member) -> asyncio.Future[JoinResult]:
        waiter: asyncio.Future[JoinResult] = self.loop.create_future()
        _answer_join(
            member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
        )  # a duplicate join
        member.awaiting_join = _resolver(waiter)
        return waiter

    @staticmethod
    def _current_generation(group: Group, member: Member, *, with_members: bool) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            _member_list(group) if with_members else [],
        )

    # ------------------------------------------------------------------ rebalancing

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                _answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self._cancel(group, "sync")
        initial = group.is_in(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        if initial:  # KIP-134: wait for more members before the first assignment
            self._initial_delay.add(group.group_id)
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._schedule(group, "join", delay, self._initial_delay_over, group, delay, remaining)
        else:
            self._schedule(group, "join", group.rebalance_timeout_ms, self._complete_join, group)
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
            self._schedule(
                group,
                "join",
                next_delay,
                self._initial_delay_over,
                group,
                next_delay,
                max(remaining - delay, 0),
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        """A non-initial join phase ends as soon as every member has rejoined."""
        timer = self._timers.get((group.group_id, "join"))
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and group.group_id not in self._initial_delay
            and group.has_all_members_joined()
            and timer is not None
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._cancel(group, "join")
        self._initial_delay.discard(group.group_id)
        if not group.is_in(GroupState.PREPARING_REBALANCE) or self.groups.get(group.group_id) is not group:
            return
        for member in [m for m in group.members.values() if m.awaiting_join is None and not m.is_static]:
            self._remove_member(group, member.member_id, "did not rejoin in time", rebalance=False)
        joined = [m for m in group.members.values() if m.awaiting_join is not None]
        leader = group.members.get(group.leader_id or "")
        if joined and (leader is None or leader.awaiting_join is None):
            group.leader_id = joined[0].member_id
        if group.members and not joined:  # only static members that have not come back yet
            self._schedule(group, "join", group.rebalance_timeout_ms, self._complete_join, group)
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
            self._spawn(self._store_empty(group))
            return
        members = _member_list(group)
        for member in group.members.values():
            result = JoinResult(
                ErrorCode.NONE,
                member.member_id,
                group.generation,
                group.protocol_type,
                group.protocol,
                group.leader_id or "",
                members if member.member_id == group.leader_id else [],
            )
            _answer_join(member, result)
            member.is_new = False
            self._schedule_heartbeat(group, member)
        self._schedule(group, "sync", group.rebalance_timeout_ms, self._sync_expired, group, group.generation)

    async def _store_empty(self, group: Group) -> None:
        error = await self._store_group(group)
        if error:
            log.warning(
                "group %s: writing its empty generation %d failed: %s",
                group.group_id,
                group.generation,
                error.name,
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
            self._remove_member(group, member_id, "did not send SyncGroup in time", rebalance=False)
        self._maybe_prepare_rebalance(group, f"members {late} did not sync")

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
        error = self._sync_error(group_id, generation, member_id, instance_id, protocol_type, protocol)
        if error:
            return SyncResult(error)
        group = self.groups[group_id]
        group.pending_sync.discard(member_id)
        member = group.members[member_id]
        if group.is_in(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_in(GroupState.STABLE):
            self._schedule_heartbeat(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment)
        waiter: asyncio.Future[SyncResult] = self.loop.create_future()
        member.awaiting_sync = _resolver(waiter)
        if member_id == group.leader_id:
            self._spawn(self._complete_sync(group, dict(assignments)))
        return await waiter

    def _sync_error(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol: str | None,
    ) -> ErrorCode:
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
        return ErrorCode.NONE

    async def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        generation = group.generation
        for member_id in group.members:
            assignments.setdefault(member_id, b"")
        error = await self._store_group(group, assignments)
        if group.generation != generation or not group.is_in(GroupState.COMPLETING_REBALANCE):
            return  # a rebalance or an unload overtook the write; its members were answered then
        if error:
            for member in group.members.values():
                _answer_sync(member, SyncResult(error))
            self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member_id, member in group.members.items():
            member.assignment = assignments.get(member_id, b"")
            _answer_sync(
                member, SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment)
            )
            self._schedule_heartbeat(group, member)
        group.transition(GroupState.STABLE, now_ms())
        self.events.emit(
            "group_stable", group=group.group_id, generation=generation, members=len(group.members)
        )

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
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per (member id, instance id) leaving)."""
        error = self._status(group_id)
        if error:
            return error, []
        group = self.groups.get(group_id)
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
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._cancel(group, f"pending:{member_id}")
                self._maybe_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            error = self._member_error(group, member_id, instance_id)
            if not error:
                self._remove_member(group, member_id, "left the group", rebalance=True)
            errors.append(error)
        return ErrorCode.NONE, errors

    def _remove_member(self, group: Group, member_id: str, reason: str, *, rebalance: bool) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        self._cancel(group, f"heartbeat:{member_id}")
        _answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        _answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
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
            self._maybe_complete_join(group)

    def _expire_member(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            self._schedule_heartbeat(group, member)  # parked in a request: alive
            return
        self._remove_member(group, member_id, "session timed out", rebalance=True)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitRecord],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self._commit_error(group_id, generation, member_id, instance_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.groups[group_id]
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id])
        too_large = {
            tp
            for tp, o in offsets.items()
            if len(o.metadata.encode()) > self.config.offset_metadata_max_bytes
        }
        results = dict.fromkeys(too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE)
        writing = {tp: o for tp, o in offsets.items() if tp not in too_large}
        if not writing:
            return results
        records: Records = [
            offset_commit_record(group_id, tp.topic, tp.partition, o) for tp, o in writing.items()
        ]
        group.pending_commits.update(writing.keys())
        try:
            appended = await self.offsets_log.append(self.partition_of(group_id), records, replicated=True)
        finally:
            group.pending_commits.subtract(writing.keys())
            group.pending_commits = +group.pending_commits
        error = _COMMIT_WRITE_ERRORS.get(appended, appended)
        if not error and self.groups.get(group_id) is group and not group.is_in(GroupState.DEAD):
            group.offsets.update(writing)
        results.update(dict.fromkeys(writing, error))
        return results

    def _commit_error(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        error = self._status(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.ILLEGAL_GENERATION
            # a consumer that assigns partitions itself: its group exists only to hold offsets
            self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms())
            return ErrorCode.NONE
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE
        error = self._committer_error(group, generation, member_id, instance_id)
        if error:
            return error
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

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

    async def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, *, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchResult]]:
        """(group error, per partition); None asks for every partition with a committed offset."""
        error = self._status(group_id, allow_empty=True)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [], NO_OFFSET)
        wanted = list(group.offsets) if partitions is None else partitions
        out: dict[TopicPartition, OffsetFetchResult] = {}
        for tp in wanted:
            if require_stable and group.pending_commits.get(tp):
                out[tp] = OffsetFetchResult(-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            committed = group.offsets.get(tp)
            out[tp] = (
                NO_OFFSET
                if committed is None
                else OffsetFetchResult(committed.offset, committed.leader_epoch, committed.metadata)
            )
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ admin

    async def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]); LOAD_IN_PROGRESS while any partition loads."""
        wanted = {s.lower() for s in states}
        groups = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not wanted or g.state.value.lower() in wanted
        ]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        return error, sorted(groups)

    async def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._status(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if error or group is None:
            return error, GroupSummary(group_id, GroupState.DEAD.value, "", "", [])
        stable = group.is_in(GroupState.STABLE)
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        return ErrorCode.NONE, GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            group.protocol or "" if stable else "",
            members,
        )

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self._status(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if error:
                out[group_id] = error
            elif group is None or group.is_in(GroupState.DEAD):
                out[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in(GroupState.EMPTY):
                out[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                out[group_id] = ErrorCode.NONE
                self._delete(group, "deleted by request")
        return out

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (on the loop); Empty groups left without
        offsets are deleted. Returns how many offsets expired."""
        now = now_ms()
        retention = self.config.offsets_retention_minutes * 60_000
        expired = 0
        for group in list(self.groups.values()):
            if self.partition_of(group.group_id) not in self.owned:
                continue
            gone = [tp for tp, o in group.offsets.items() if _expired(group, tp, o, now, retention)]
            if gone:
                expired += len(gone)
                for tp in gone:
                    del group.offsets[tp]
                self._spawn(
                    self._tombstones(
                        group.group_id, [offset_key(group.group_id, tp.topic, tp.partition) for tp in gone]
                    )
                )
            if group.is_in(GroupState.EMPTY) and not group.offsets and not group.members:
                self._delete(group, "offsets expired")
        return expired

    def _delete(self, group: Group, reason: str) -> None:
        keys = [offset_key(group.group_id, tp.topic, tp.partition) for tp in group.offsets]
        if group.generation > 0:
            keys.append(group_key(group.group_id))
        self._cancel_timers(group)
        group.transition(GroupState.DEAD, now_ms())
        del self.groups[group.group_id]
        self.events.emit("group_deleted", group=group.group_id, reason=reason, offsets=len(group.offsets))
        if keys:
            self._spawn(self._tombstones(group.group_id, keys))

    async def _tombstones(self, group_id: str, keys: list[bytes]) -> None:
        """Kafka appends tombstones without waiting for the ISR; a lost one is written again later."""
        error = await self.offsets_log.append(
            self.partition_of(group_id), [(k, None) for k in keys], replicated=False
        )
        if error:
            log.info("group %s: %d tombstones not written (%s)", group_id, len(keys), error.name)

    # ------------------------------------------------------------------ writes and timers

    async def _store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        record = group_metadata_record(group.group_id, group.record(assignments))
        error = await self.offsets_log.append(self.partition_of(group.group_id), [record], replicated=True)
        return _GROUP_WRITE_ERRORS.get(error, error)

    def _schedule_heartbeat(self, group: Group, member: Member) -> None:
        timeout = NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms
        self._schedule(
            group, f"heartbeat:{member.member_id}", timeout, self._expire_member, group, member.member_id
        )

    def _schedule(
        self, group: Group, name: str, delay_ms: int, callback: Callable[..., None], *args: Any
    ) -> None:
        key = (group.group_id, name)
        previous = self._timers.pop(key, None)
        if previous is not None:
            previous.cancel()

        def fire() -> None:
            if self._timers.get(key) is handle:
                del self._timers[key]
            try:
                callback(*args)
            except Exception:
                log.exception("group %s: timer %s failed", group.group_id, name)

        handle = self.loop.call_later(delay_ms / 1000.0, fire)
        self._timers[key] = handle

    def _cancel(self, group: Group, name: str) -> None:
        handle = self._timers.pop((group.group_id, name), None)
        if handle is not None:
            handle.cancel()

    def _cancel_timers(self, group: Group) -> None:
        self._initial_delay.discard(group.group_id)
        for key in [k for k in self._timers if k[0] == group.group_id]:
            self._timers.pop(key).cancel()

    def _spawn(self, coro: Any) -> None:
        self.loop.create_task(coro).add_done_callback(_log_failure)

    def shutdown(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for group in self.groups.values():
            for member in group.members.values():
                _answer_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                _answer_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))


def _resolver(waiter: asyncio.Future[Any]) -> Callable[[Any], None]:
    """Answers a parked request once; a waiter already done (its client went away) is left alone."""

    def resolve(result: Any) -> None:
        if not waiter.done():
            waiter.set_result(result)

    return resolve


def _member_list(group: Group) -> list[tuple[str, str | None, bytes]]:
    return [
        (m.member_id, m.group_instance_id, m.metadata_for(group.protocol)) for m in group.members.values()
    ]


def _answer_join(member: Member, result: JoinResult) -> None:
    respond, member.awaiting_join = member.awaiting_join, None
    if respond is not None:
        respond(result)


def _answer_sync(member: Member, result: SyncResult) -> None:
    respond, member.awaiting_sync = member.awaiting_sync, None
    if respond is not None:
        respond(result)


def _expired(
    group: Group, tp: TopicPartition, offset: OffsetCommitRecord, now: int, retention_ms: int
) -> bool:
    """Kafka's KIP-211 rules, without the subscribed-topics case of Stable consumer groups (those
    offsets never expire here while the group is active)."""
    if group.pending_commits.get(tp):
        return False
    if offset.expire_timestamp >= 0:
        return now >= offset.expire_timestamp
    if group.protocol_type and group.is_in(GroupState.EMPTY):
        base = group.state_timestamp_ms if group.state_timestamp_ms >= 0 else offset.commit_timestamp
        return now - base >= retention_ms
    if not group.protocol_type:
        return now - offset.commit_timestamp >= retention_ms
    return False


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("group coordinator task failed", exc_info=task.exception())
