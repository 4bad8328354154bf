"""Offsets committed in a transaction (TxnOffsetCommit): pending until the transaction's marker, then
applied (COMMIT) or dropped (ABORT), and the same outcome when a new coordinator reads the log back.

The coordinator runs on the test's event loop; its offsets log is an in-memory fake that keeps real
record batches (transactional ones included) and the markers the test writes, so a load goes through
the same fold as on a broker.
"""

from __future__ import annotations

import asyncio

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.loader import LoadedPartition, load_batches
from broker.group.metadata_manager import Records
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.consumer_offsets import OffsetCommitRecord
from protocol.control_records import control_batch
from protocol.record_batch import build_batch
from protocol.topic_partition import TopicPartition
from tests.support.waiting import wait_until

GROUP = "etl"
TP = TopicPartition("raw", 0)
CONFIG = GroupConfig(offsets_topic_num_partitions=1)
PID = 4000


class BatchLog:
    """An offsets log keeping whole batches, as the broker's partition would."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []

    async def append(
        self, partition: int, records: Records, *, replicated: bool, producer: tuple[int, int] | None = None
    ) -> ErrorCode:
        await asyncio.sleep(0)
        pid, epoch = producer if producer is not None else (-1, -1)
        self.batches.append(
            build_batch(records, producer_id=pid, producer_epoch=epoch, transactional=producer is not None)
        )
        return ErrorCode.NONE

    def marker(self, producer_id: int, commit: bool) -> None:
        self.batches.append(control_batch(producer_id, 0, 0, commit, 0))

    async def load(self, partition: int) -> LoadedPartition:
        return load_batches(list(self.batches))


async def coordinator(log: BatchLog, tmp_path, epoch: int = 0) -> GroupCoordinator:
    found = GroupCoordinator(1, CONFIG, log, EventLog(tmp_path / f"events-{epoch}.jsonl", "broker-1"))
    found.bind(asyncio.get_running_loop())
    found.on_election(0, epoch)
    await wait_until(lambda: 0 in found.owned, "the offsets partition loaded")
    return found


def offset(value: int) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        offset=value, metadata="", commit_timestamp=1, leader_epoch=-1, expire_timestamp=-1
    )


async def fetch(found: GroupCoordinator, *, stable: bool = False) -> tuple[int, ErrorCode]:
    _, offsets = await found.fetch_offsets(GROUP, [TP], require_stable=stable)
    return offsets[TP].offset, offsets[TP].error


async def commit_in_transaction(found: GroupCoordinator, value: int, pid: int = PID) -> None:
    errors = await found.transactional.commit(GROUP, (pid, 0), -1, "", None, {TP: offset(value)})
    assert errors == {TP: ErrorCode.NONE}


async def test_offsets_of_a_transaction_show_only_at_its_commit(tmp_path) -> None:
    log = BatchLog()
    found = await coordinator(log, tmp_path)
    await commit_in_transaction(found, 10)
    assert await fetch(found) == (-1, ErrorCode.NONE)
    assert await fetch(found, stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    log.marker(PID, commit=True)
    found.on_transaction_marker(0, PID, True)
    await wait_until(lambda: TP in found.groups[GROUP].offsets, "the commit applied")
    assert await fetch(found, stable=True) == (10, ErrorCode.NONE)


async def test_an_aborted_transaction_leaves_the_committed_offset(tmp_path) -> None:
    log = BatchLog()
    found = await coordinator(log, tmp_path)
    await commit_in_transaction(found, 10)
    log.marker(PID, commit=True)
    found.on_transaction_marker(0, PID, True)
    await commit_in_transaction(found, 20)
    log.marker(PID, commit=False)
    found.on_transaction_marker(0, PID, False)
    await wait_until(lambda: not found.groups[GROUP].pending_txn_offsets, "the abort applied")
    assert await fetch(found, stable=True) == (10, ErrorCode.NONE)


async def test_a_new_coordinator_reads_the_same_outcome_back(tmp_path) -> None:
    log = BatchLog()
    first = await coordinator(log, tmp_path)
    await commit_in_transaction(first, 10)
    log.marker(PID, commit=True)
    await commit_in_transaction(first, 20)
    log.marker(PID, commit=False)
    await commit_in_transaction(first, 30, pid=PID + 1)  # still open when the partition moves
    second = await coordinator(log, tmp_path, epoch=1)
    assert await fetch(second) == (10, ErrorCode.NONE)
    assert await fetch(second, stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    log.marker(PID + 1, commit=True)
    second.on_transaction_marker(0, PID + 1, True)
    await wait_until(lambda: second.groups[GROUP].offsets[TP].offset == 30, "the open transaction committed")


async def test_a_member_of_an_older_generation_is_refused(tmp_path) -> None:
    found = await coordinator(BatchLog(), tmp_path)
    errors = await found.transactional.commit(GROUP, (PID, 0), 3, "", None, {TP: offset(1)})
    assert errors == {TP: ErrorCode.ILLEGAL_GENERATION}
    errors = await found.transactional.commit(GROUP, (PID, 0), -1, "someone", None, {TP: offset(1)})
    assert errors == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
