"""Kafka's TransactionStateManager: the ``__transaction_state`` partitions led here, the transactional
ids they hold, and every change to one written to its partition before it is believed.

A partition is loaded when this broker becomes its leader (its leader epoch is the coordinator epoch
every marker of its transactions carries) and forgotten on resignation. While it loads, its ids
answer COORDINATOR_LOAD_IN_PROGRESS; a partition not led here answers NOT_COORDINATOR. Only the event
loop calls in (LeaderAndIsr arrives through ``on_election``/``on_resignation`` from any thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from broker.group.timers import GroupScheduler
from broker.internal_log import InternalTopicLog
from broker.partition_epochs import PartitionEpochs
from broker.txn.state import TxnMetadata
from daemon.eventlog import EventLog
from protocol import ErrorCode
from protocol.errors import ProtocolError
from protocol.record_batch import decode_records, parse_header
from protocol.transaction_log import (
    decode_transaction_key,
    decode_transaction_value,
    encode_transaction_value,
    transaction_key,
    transaction_partition_for,
)

__all__ = ["Loaded", "TransactionStateManager", "load_transactions"]

log = logging.getLogger("broker.txn")

# Log-append errors as the coordinator reports them (Kafka's appendTransactionToLog).
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@dataclass
class Loaded:
    """A partition read back: the latest metadata of each transactional id still in it."""

    transactions: dict[str, TxnMetadata]
    records: int = 0
    skipped: int = 0


def load_transactions(batches: Iterable[bytes]) -> Loaded:
    """Fold ``__transaction_state`` batches, oldest first: the last value of a key wins, a tombstone
    removes it. A record no Kafka version writes is counted and skipped, never fatal."""
    loaded = Loaded({})
    for batch in batches:
        header = parse_header(batch)
        if header.is_control:
            continue
        try:
            records = decode_records(batch)
        except ProtocolError as exc:
            log.warning("__transaction_state: skipping a batch at offset %d: %s", header.base_offset, exc)
            loaded.skipped += max(header.records_count, 0)
            continue
        for record in records:
            loaded.records += 1
            try:
                if record.key is None:
                    raise ProtocolError("a record without a key")
                transactional_id = decode_transaction_key(record.key)
                if record.value is None:
                    loaded.transactions.pop(transactional_id, None)
                else:
                    value = decode_transaction_value(record.value)
                    loaded.transactions[transactional_id] = TxnMetadata.from_record(transactional_id, value)
            except (ProtocolError, ValueError) as exc:
                loaded.skipped += 1
                log.warning("__transaction_state: skipping a record: %s", exc)
    return loaded


class TransactionStateManager:
    def __init__(
        self,
        txn_log: InternalTopicLog,
        events: EventLog,
        scheduler: GroupScheduler,
        *,
        partition_count: int,
        on_loaded: Callable[[int, int, list[TxnMetadata]], None],
    ) -> None:
        self.txn_log = txn_log
        self.events = events
        self.scheduler = scheduler
        self.partition_count = partition_count
        self.transactions: dict[str, TxnMetadata] = {}
        self.owned: dict[int, int] = {}
        """Partition -> its coordinator epoch (the leader epoch it was loaded at)."""
        self.loading: dict[int, int] = {}
        self.pending: set[str] = set()
        """Ids with a write in flight: any other change to them is CONCURRENT_TRANSACTIONS meanwhile."""
        self._epochs = PartitionEpochs()
        self._on_loaded = on_loaded
        """Called once a partition is loaded: the coordinator finishes what was being committed."""

    def partition_of(self, transactional_id: str) -> int:
        return transaction_partition_for(transactional_id, self.partition_count)

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        return self.owned.get(self.partition_of(transactional_id))

    def status_error(self, transactional_id: str | None) -> ErrorCode:
        """The checks every transactional request passes first."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        partition = self.partition_of(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def owned_transactions(self) -> Iterator[TxnMetadata]:
        return (
            m for m in list(self.transactions.values()) if self.partition_of(m.transactional_id) in self.owned
        )

    # ------------------------------------------------------------------ writes

    async def write(
        self, metadata: TxnMetadata | None, transactional_id: str, coordinator_epoch: int
    ) -> ErrorCode:
        """Write ``metadata`` (None: a tombstone) and, once the partition's ISR has it and this broker
        still leads the partition at ``coordinator_epoch``, make it the id's state."""
        partition = self.partition_of(transactional_id)
        value = None if metadata is None else encode_transaction_value(metadata.record())
        self.pending.add(transactional_id)
        try:
            appended = await self.txn_log.append(
                partition, [(transaction_key(transactional_id), value)], replicated=True
            )
        finally:
            self.pending.discard(transactional_id)
        error = _WRITE_ERRORS.get(appended, appended)
        if error == ErrorCode.NONE and self.owned.get(partition) != coordinator_epoch:
            error = ErrorCode.NOT_COORDINATOR
        if error != ErrorCode.NONE:
            log.info("transaction %s: state not written (%s)", transactional_id, error.name)
            return error
        if metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = metadata
        return ErrorCode.NONE

    # ------------------------------------------------------------------ ownership (LeaderAndIsr)

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker newly leads ``__transaction_state-partition`` (any thread): load it."""
        self.scheduler.loop.call_soon_threadsafe(self._start_load, partition, epoch)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        self.scheduler.loop.call_soon_threadsafe(self._unload, partition, epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        if not self._epochs.accept(partition, epoch) or self.owned.get(partition) == epoch:
            return
        if self.loading.get(partition) == epoch:
            return
        self._forget(partition)
        self.loading[partition] = epoch
        self.scheduler.spawn(self._load(partition, epoch), name=f"load-transactions-{partition}")

    async def _load(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            loaded = await self.txn_log.fold(partition, load_transactions, Loaded({}))
        except Exception:
            log.exception(
                "loading __transaction_state-%d failed; its transactional ids start empty", partition
            )
            loaded = Loaded({})
        if self.loading.get(partition) != epoch:
            return  # resigned or re-elected meanwhile: this result is stale
        del self.loading[partition]
        self.owned[partition] = epoch
        self.transactions.update(loaded.transactions)
        self.events.emit(
            "txn_coordinator_loaded",
            partition=partition,
            coordinator_epoch=epoch,
            transactional_ids=len(loaded.transactions),
            records=loaded.records,
            skipped=loaded.skipped,
            load_ms=round((time.monotonic() - started) * 1000, 1),
        )
        self._on_loaded(partition, epoch, list(loaded.transactions.values()))

    def _unload(self, partition: int, epoch: int | None) -> None:
        if not self._epochs.accept(partition, epoch):
            return
        was_owned = partition in self.owned or partition in self.loading
        count = self._forget(partition)
        if was_owned:
            self.events.emit(
                "txn_coordinator_unloaded",
                partition=partition,
                coordinator_epoch=epoch,
                transactional_ids=count,
            )

    def _forget(self, partition: int) -> int:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        gone = [t for t in self.transactions if self.partition_of(t) == partition]
        for transactional_id in gone:
            del self.transactions[transactional_id]
        return len(gone)
