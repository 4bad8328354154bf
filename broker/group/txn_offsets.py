"""Offsets committed inside a transaction (TxnOffsetCommit): written as the producer's transactional
records, visible to the group only once its COMMIT marker reaches the group's partition.

Kafka's rules (KIP-98, and KIP-447's generation checks from TxnOffsetCommit v3): the group is created
Empty if it does not exist; a Dead group is COORDINATOR_NOT_AVAILABLE; a member id the group does not
know is UNKNOWN_MEMBER_ID and a generation other than the group's ILLEGAL_GENERATION. Pending offsets
make OffsetFetch with ``require_stable`` answer UNSTABLE_OFFSET_COMMIT for their partitions, and are
never expired.
"""

from __future__ import annotations

from broker.group.metadata_manager import COMMIT_WRITE_ERRORS, GroupMetadataManager, Records, now_ms
from broker.group.state import Group, GroupState
from protocol import ErrorCode
from protocol.consumer_offsets import OffsetCommitRecord, offset_commit_record
from protocol.topic_partition import TopicPartition

__all__ = ["TransactionalOffsets"]


class TransactionalOffsets:
    """The group coordinator's transactional commits; called on the event loop only."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager

    async def commit(
        self,
        group_id: str,
        producer: tuple[int, int],
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetCommitRecord],
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleTxnCommitOffsets: the commit judged, then written in the producer's
        transaction; the offsets wait in the group until the transaction ends."""
        manager = self.manager
        error = manager.status_error(group_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = manager.group(group_id) or manager.add_group(Group(group_id, state_timestamp_ms=now_ms()))
        error = _committer_error(group, generation, member_id, instance_id)
        if error:
            return dict.fromkeys(offsets, error)
        limit = manager.config.offset_metadata_max_bytes
        results = {
            tp: ErrorCode.OFFSET_METADATA_TOO_LARGE
            for tp, o in offsets.items()
            if len(o.metadata.encode()) > limit
        }
        writing = {tp: o for tp, o in offsets.items() if tp not in results}
        if not writing:
            return results
        records: Records = [
            offset_commit_record(group_id, tp.topic, tp.partition, o) for tp, o in writing.items()
        ]
        group.pending_commits.update(writing.keys())
        try:
            appended = await manager.offsets_log.append(
                manager.partition_of(group_id), records, replicated=True, producer=producer
            )
        finally:
            group.pending_commits.subtract(writing.keys())
            group.pending_commits = +group.pending_commits
        error = COMMIT_WRITE_ERRORS.get(appended, appended)
        if not error and manager.is_current(group) and not group.is_in(GroupState.DEAD):
            group.pending_txn_offsets.setdefault(producer[0], {}).update(writing)
        results.update(dict.fromkeys(writing, error))
        return results

    def complete(self, partition: int, producer_id: int, commit: bool) -> int:
        """The producer's marker is written in ``__consumer_offsets-partition``: its pending offsets in
        that partition's groups are applied (COMMIT) or dropped (ABORT). Returns how many groups."""
        manager = self.manager
        settled = 0
        for group in list(manager.groups.values()):
            if manager.partition_of(group.group_id) != partition:
                continue
            offsets = group.pending_txn_offsets.pop(producer_id, None)
            if offsets is None:
                continue
            settled += 1
            if commit and not group.is_in(GroupState.DEAD):
                group.offsets.update(offsets)
        return settled


def _committer_error(group: Group, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
    if group.is_in(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if instance_id is not None and group.static_members.get(instance_id, member_id) != member_id:
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id and member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation >= 0 and generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
