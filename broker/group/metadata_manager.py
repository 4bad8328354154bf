"""Kafka's GroupMetadataManager: the ``__consumer_offsets`` partitions owned here, and what they store.

It loads a partition when this broker becomes its leader and forgets it on resignation, keeps the
groups of owned partitions, stores group metadata and committed offsets as records (appended on the
loop in the order they were decided, answered once the partition's ISR has them, as Kafka's
coordinator does), answers OffsetFetch, expires offsets and deletes groups with tombstones.

Which partition a group lives in is Kafka's ``abs(hashCode) % offsets.topic.num.partitions`` with
the partition count fixed at start-up. While a partition loads, its groups answer
COORDINATOR_LOAD_IN_PROGRESS; a partition this broker does not lead answers NOT_COORDINATOR. The
membership protocol (``broker/group/coordinator.py``) reaches storage only through
:class:`GroupStore`, and hears of groups arriving and leaving through two callbacks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.group.config import GroupConfig
from broker.group.loader import LoadedPartition
from broker.group.state import Group, GroupState
from broker.group.timers import GroupScheduler
from broker.partition_epochs import PartitionEpochs
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
    """The manager's access to the ``__consumer_offsets`` partitions this broker hosts."""

    async def append(
        self, partition: int, records: Records, *, replicated: bool, producer: tuple[int, int] | None = None
    ) -> ErrorCode:
        """Append as leader; with ``replicated``, wait until the ISR has the records (or time out); with
        ``producer`` (id, epoch), in a transactional batch of that producer (TxnOffsetCommit)."""
        ...

    async def load(self, partition: int) -> LoadedPartition:
        """Read the partition's log from its start to its end (off the loop)."""
        ...


class GroupStore(Protocol):
    """What the membership protocol asks of the manager, and nothing more."""

    def status_error(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: a valid id, of a partition owned here and loaded."""
        ...

    def group(self, group_id: str) -> Group | None:
        """The cached group, or None."""
        ...

    def add_group(self, group: Group) -> Group:
        """Cache a group the protocol created (a first join, a first commit)."""
        ...

    def is_current(self, group: Group) -> bool:
        """Still the cached group of its id: not unloaded, deleted or replaced."""
        ...

    async def store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        """Write the group's metadata record (with a leader's ``assignments``), as a group error."""
        ...

    async def store_offsets(
        self, group: Group, offsets: dict[TopicPartition, OffsetCommitRecord]
    ) -> dict[TopicPartition, ErrorCode]:
        """Write validated commits and cache them once written; one error per partition."""
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
COMMIT_WRITE_ERRORS = {
    **_GROUP_WRITE_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass(frozen=True)
class OffsetFetchResult:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


NO_OFFSET = OffsetFetchResult(-1, -1, "")


def now_ms() -> int:
    """Wall-clock milliseconds: what commit and state timestamps in ``__consumer_offsets`` hold."""
    return int(time.time() * 1000)


class GroupMetadataManager:
    def __init__(
        self,
        config: GroupConfig,
        offsets_log: OffsetsLog,
        events: EventLog,
        scheduler: GroupScheduler,
        *,
        partition_count: int,
        on_group_loaded: Callable[[Group], None],
        on_group_removed: Callable[[Group], None],
    ) -> None:
        self.config = config
        self.offsets_log = offsets_log
        self.events = events
        self.scheduler = scheduler
        self.partition_count = partition_count
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self._epochs = PartitionEpochs()
        self._on_group_loaded = on_group_loaded
        """Kafka's onGroupLoaded: the protocol starts the loaded members' session timers."""
        self._on_group_removed = on_group_removed
        """Kafka's onGroupUnloaded, also called for a deleted group: the protocol stops the group's
        timers and answers its parked requests, before the group turns Dead and leaves the cache."""

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    # ------------------------------------------------------------------ ownership (LeaderAndIsr)

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker newly leads ``__consumer_offsets-partition`` (any thread): load its groups."""
        self.scheduler.loop.call_soon_threadsafe(self._start_load, partition, epoch)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """No longer the leader (any thread): forget the partition's groups."""
        self.scheduler.loop.call_soon_threadsafe(self._unload, partition, epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        if not self._epochs.accept(partition, epoch) or partition in self.owned or partition in self.loading:
            return
        self.loading.add(partition)
        self.scheduler.spawn(self._load(partition, epoch), name=f"load-offsets-{partition}")

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
            group.pending_txn_offsets = loaded.pending_offsets(group_id)
            self.groups[group_id] = group
            self._on_group_loaded(group)
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
        if not self._epochs.accept(partition, epoch):
            return
        was_owned = partition in self.owned or partition in self.loading
        self.owned.discard(partition)
        self.loading.discard(partition)
        unloaded = [g for g in self.groups.values() if self.partition_of(g.group_id) == partition]
        for group in unloaded:
            self._on_group_removed(group)
            group.transition(GroupState.DEAD, now_ms())
            del self.groups[group.group_id]
        if was_owned:
            self.events.emit(
                "coordinator_unloaded", partition=partition, leader_epoch=epoch, groups=len(unloaded)
            )

    # ------------------------------------------------------------------ the protocol's GroupStore

    def status_error(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: the checks every group API makes first."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_of(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def add_group(self, group: Group) -> Group:
        self.groups[group.group_id] = group
        return group

    def is_current(self, group: Group) -> bool:
        return self.groups.get(group.group_id) is group

    async def store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        record = group_metadata_record(group.group_id, group.record(assignments))
        error = await self.offsets_log.append(self.partition_of(group.group_id), [record], replicated=True)
        return _GROUP_WRITE_ERRORS.get(error, error)

    async def store_offsets(
        self, group: Group, offsets: dict[TopicPartition, OffsetCommitRecord]
    ) -> dict[TopicPartition, ErrorCode]:
        """Commits whose metadata is too large are refused; the rest go in one batch, are counted as
        pending (OffsetFetch's ``require_stable``) while it is written, and cached once it is."""
        too_large = {
            tp
            for tp, o in offsets.items()
            if len(o.metadata.encode()) > self.config.offset_metadata_max_bytes
        }
        results = dict.fromkeys(too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE)
        writing = {tp: o for tp, o in offsets.items() if tp not in too_large}
        if not writing:
            return results
        group_id = group.group_id
        records: Records = [
            offset_commit_record(group_id, tp.topic, tp.partition, o) for tp, o in writing.items()
        ]
        group.pending_commits.update(writing.keys())
        try:
            appended = await self.offsets_log.append(self.partition_of(group_id), records, replicated=True)
        finally:
            group.pending_commits.subtract(writing.keys())
            group.pending_commits = +group.pending_commits
        error = COMMIT_WRITE_ERRORS.get(appended, appended)
        if not error and self.is_current(group) and not group.is_in(GroupState.DEAD):
            group.offsets.update(writing)
        results.update(dict.fromkeys(writing, error))
        return results

    # ------------------------------------------------------------------ OffsetFetch

    async def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, *, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchResult]]:
        """(group error, per partition); None asks for every partition with a committed offset."""
        error = self.status_error(group_id, allow_empty=True)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [], NO_OFFSET)
        wanted = list(group.offsets) if partitions is None else partitions
        out: dict[TopicPartition, OffsetFetchResult] = {}
        for tp in wanted:
            if require_stable and group.has_pending_commit(tp):
                out[tp] = OffsetFetchResult(-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            committed = group.offsets.get(tp)
            out[tp] = (
                NO_OFFSET
                if committed is None
                else OffsetFetchResult(committed.offset, committed.leader_epoch, committed.metadata)
            )
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ expiry and deletion

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
                self.scheduler.spawn(
                    self._tombstones(
                        group.group_id, [offset_key(group.group_id, tp.topic, tp.partition) for tp in gone]
                    )
                )
            if group.is_in(GroupState.EMPTY) and not group.offsets and not group.members:
                self.delete_group(group, "offsets expired")
        return expired

    def delete_group(self, group: Group, reason: str) -> None:
        """The group turns Dead, leaves the cache, and its records get tombstones (an Empty group:
        DeleteGroups or expiry)."""
        keys = [offset_key(group.group_id, tp.topic, tp.partition) for tp in group.offsets]
        if group.generation > 0:
            keys.append(group_key(group.group_id))
        self._on_group_removed(group)
        group.transition(GroupState.DEAD, now_ms())
        del self.groups[group.group_id]
        self.events.emit("group_deleted", group=group.group_id, reason=reason, offsets=len(group.offsets))
        if keys:
            self.scheduler.spawn(self._tombstones(group.group_id, keys))

    async def _tombstones(self, group_id: str, keys: list[bytes]) -> None:
        """Kafka appends tombstones without waiting for the ISR; a lost one is written again later."""
        error = await self.offsets_log.append(
            self.partition_of(group_id), [(k, None) for k in keys], replicated=False
        )
        if error:
            log.info("group %s: %d tombstones not written (%s)", group_id, len(keys), error.name)


def _expired(
    group: Group, tp: TopicPartition, offset: OffsetCommitRecord, now: int, retention_ms: int
) -> bool:
    """Kafka's KIP-211 rules, without the subscribed-topics case of Stable consumer groups (those
    offsets never expire here while the group is active)."""
    if group.has_pending_commit(tp):
        return False
    if offset.expire_timestamp >= 0:
        return now >= offset.expire_timestamp
    if group.protocol_type and group.is_in(GroupState.EMPTY):
        base = group.state_timestamp_ms if group.state_timestamp_ms >= 0 else offset.commit_timestamp
        return now - base >= retention_ms
    if not group.protocol_type:
        return now - offset.commit_timestamp >= retention_ms
    return False
