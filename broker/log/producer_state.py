"""Idempotent producers' state in one partition: who wrote what, so retries are stored once.

For every producer id the log remembers its epoch and its last few batches (sequence range, offsets,
max timestamp). A leader checks each client batch against it (Kafka's ``ProducerAppendInfo``): a
batch already stored is a duplicate, answered with the original offsets and not stored again; a
stale epoch or a sequence gap is refused. Followers and log recovery apply batches as they come,
without checks (a broken rule is only logged). Snapshots (``<offset>.snapshot``, Kafka's byte
format) keep the state across restarts so that only the log after the latest one has to be read again.

Transactions (``broker.log.transactions``): a producer's transactional batch opens its transaction
(``current_txn_first_offset``), a marker ends it; on a leader a plain batch inside an open
transaction is InvalidTxnState, and a marker from an older producer epoch or coordinator epoch is
refused. The table keeps the open transactions beside the entries, for the last stable offset.

Pure and single-threaded: no locks or files here; :class:`broker.log.Log` calls it under its lock
and owns the snapshot files. Entries are immutable and replaced whole, so a reader on another
thread sees one consistent entry.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import crc32c

from broker.log.segment import file_name
from broker.log.transactions import (
    CompletedTxn,
    InvalidTxnState,
    TransactionCoordinatorFenced,
    TransactionTracker,
    TxnMarker,
)
from protocol.record_batch import RecordBatchHeader

log = logging.getLogger("broker.log")

NUM_BATCHES_TO_RETAIN = 5
"""Batches kept per producer: a client keeps at most 5 requests in flight when idempotent."""
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""producer.id.expiration.ms (KIP-854)."""

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, producer count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
"""producer id, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch,
first offset of the open transaction (-1: none): 46 bytes."""
_CRC_AT = 2
_CRC_FROM = 6
"""The CRC-32C covers everything after the CRC field itself."""


class InvalidProducerEpoch(Exception):
    """A client batch from an epoch older than the producer's current one (INVALID_PRODUCER_EPOCH)."""

    def __init__(self, producer_id: int, epoch: int, current_epoch: int, offset: int) -> None:
        super().__init__(
            f"producer {producer_id}: epoch {epoch} of the batch at offset {offset} is older than "
            f"its current epoch {current_epoch}"
        )
        self.producer_id = producer_id
        self.epoch = epoch
        self.current_epoch = current_epoch


class OutOfOrderSequence(Exception):
    """A client batch whose first sequence does not follow the producer's last one
    (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    def __init__(self, producer_id: int, epoch: int, sequence: int, offset: int, reason: str) -> None:
        super().__init__(
            f"producer {producer_id} epoch {epoch}: sequence {sequence} of the batch at offset {offset} "
            f"is out of order: {reason}"
        )
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = sequence


class CorruptSnapshot(Exception):
    """A snapshot file that cannot be trusted: wrong version, CRC or length."""


# ---------------------------------------------------------------- sequences


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past Int.MAX to 0 as producers do."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to Int.MAX."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(header: RecordBatchHeader) -> int:
    """The sequence of a batch's last record (none if the batch has none)."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(header.base_sequence, header.last_offset_delta)


def in_sequence(last: int, first: int) -> bool:
    """Whether a batch starting at ``first`` directly follows one ending at ``last``."""
    return first == last + 1 or (first == 0 and last == INT32_MAX)


def tracked(header: RecordBatchHeader) -> bool:
    """Whether a batch changes producer state: it has a producer id and is data, not a marker."""
    return header.producer_id >= 0 and not header.is_control


# ---------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One stored batch of a producer, enough to recognise its retry and answer it."""

    last_seq: int
    last_offset: int
    offset_delta: int
    """``last_offset - first_offset``, which is also ``last_seq - first_seq`` (mod Int.MAX)."""
    max_timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """A producer's epoch and its last batches (at most 5, oldest first) in one partition."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = -1
    """The max timestamp of its last batch: expiration counts from it."""
    batches: tuple[BatchMetadata, ...] = ()
    coordinator_epoch: int = -1
    """Of the transaction coordinator that wrote the producer's last marker."""
    current_txn_first_offset: int = -1
    """Where the producer's open transaction starts (-1: none is open)."""

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """This entry after ``batch`` of ``epoch``: a new epoch forgets the older epoch's batches."""
        kept = self.batches[1 - NUM_BATCHES_TO_RETAIN :] if epoch == self.epoch else ()
        return ProducerStateEntry(
            self.producer_id,
            epoch,
            batch.max_timestamp,
            (*kept, batch),
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def with_transactional_data(self, transactional: bool, offset: int) -> ProducerStateEntry:
        """This entry after a data batch at ``offset``: a transactional one opens a transaction if
        none is open. InvalidTxnState for a plain batch inside an open one (the caller decides
        whether that refuses the batch)."""
        if self.current_txn_first_offset >= 0 and not transactional:
            raise InvalidTxnState(self.producer_id, offset)
        if self.current_txn_first_offset < 0 and transactional:
            return replace(self, current_txn_first_offset=offset)
        return self

    def with_marker(
        self, epoch: int, marker: TxnMarker, offset: int, timestamp: int
    ) -> tuple[ProducerStateEntry, CompletedTxn | None]:
        """This entry after a marker at ``offset``, and the transaction it ended (none if none was
        open). A newer epoch (the coordinator bumps it to fence a producer) forgets the batches."""
        completed = None
        if self.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                self.producer_id, self.current_txn_first_offset, offset, not marker.commit
            )
        newer = epoch > self.epoch
        entry = ProducerStateEntry(
            self.producer_id,
            epoch if newer else self.epoch,
            timestamp,
            () if newer else self.batches,
            marker.coordinator_epoch,
            -1,
        )
        return entry, completed

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The stored batch this one retries: same epoch, same first and last sequence."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        return self.current_txn_first_offset < 0 and now_ms - self.last_timestamp >= expiration_ms


def check_client_batch(
    current: ProducerStateEntry, pending: ProducerStateEntry, epoch: int, first_seq: int, offset: int
) -> None:
    """Kafka's epoch and sequence rules for a leader's client batch, or the exception they call for.

    ``current`` is the stored entry (an empty one, epoch -1, for an unknown producer); ``pending``
    is it with the request's earlier batches of the same producer already added.
    """
    pid = current.producer_id
    if epoch < pending.epoch:
        raise InvalidProducerEpoch(pid, epoch, pending.epoch, offset)
    if epoch != pending.epoch:
        if first_seq != 0 and pending.epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequence(
                pid, epoch, first_seq, offset, f"a new epoch (after {pending.epoch}) must start at 0"
            )
        return
    # No epoch known: everything it wrote may have gone with retention, so any sequence goes.
    if current.epoch != NO_PRODUCER_EPOCH and not in_sequence(pending.last_seq, first_seq):
        raise OutOfOrderSequence(pid, epoch, first_seq, offset, f"the last sequence is {pending.last_seq}")


@dataclass(frozen=True, slots=True)
class LeaderAppendCheck:
    """What a leader's append means for producer state: a duplicate to answer, or entries to store."""

    duplicate: BatchMetadata | None = None
    """The stored batch a retried batch repeats: the append is answered with it and stores nothing."""
    updates: dict[int, ProducerStateEntry] = field(default_factory=dict)
    """The new entries of the producers in the append, to store once it is written."""


class ProducerStateTable:
    """Every producer's entry in one partition. Not thread-safe by itself: see the module docstring."""

    __slots__ = ("_producers", "transactions")

    def __init__(self, entries: Iterable[ProducerStateEntry] = ()) -> None:
        self._producers = {entry.producer_id: entry for entry in entries}
        self.transactions = TransactionTracker(
            {
                pid: e.current_txn_first_offset
                for pid, e in self._producers.items()
                if e.current_txn_first_offset >= 0
            }
        )
        """The open transactions, kept in step with the entries."""

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> list[ProducerStateEntry]:
        """Every entry, by producer id."""
        return [self._producers[pid] for pid in sorted(self._producers)]

    def check_leader_append(
        self, batches: Iterable[tuple[RecordBatchHeader, int]], *, coordinator: bool = False
    ) -> LeaderAppendCheck:
        """Check a leader's batches, each with the base offset it is about to get, in order.

        Each batch is compared with the stored batches first: the first retry found makes the whole
        append a duplicate (a produce request holds one batch per partition). Otherwise it must pass
        :func:`check_client_batch`, and not be a plain batch inside the producer's open transaction
        (InvalidTxnState), else the exception is raised and nothing is to be appended. A
        ``coordinator``'s own batches (a TxnOffsetCommit's, written for the producer) have only their
        epoch checked, as in Kafka: they carry no sequence of the producer's.
        """
        updates: dict[int, ProducerStateEntry] = {}
        for header, base_offset in batches:
            if not tracked(header):
                continue
            pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
            last_seq = last_sequence(header)
            stored = self._producers.get(pid)
            if stored is not None and not coordinator:
                duplicate = stored.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return LeaderAppendCheck(duplicate)
            current = stored or ProducerStateEntry(pid)
            pending = updates.get(pid, current)
            if not coordinator:
                check_client_batch(current, pending, epoch, first_seq, base_offset)
            elif epoch < pending.epoch:
                raise InvalidProducerEpoch(pid, epoch, pending.epoch, base_offset)
            delta = header.last_offset_delta
            batch = BatchMetadata(last_seq, base_offset + delta, delta, header.max_timestamp)
            entry = pending.with_batch(epoch, batch)
            updates[pid] = entry.with_transactional_data(header.is_transactional, base_offset)
        return LeaderAppendCheck(None, updates)

    def check_marker(
        self, producer_id: int, epoch: int, marker: TxnMarker, offset: int, timestamp: int
    ) -> tuple[ProducerStateEntry, CompletedTxn | None]:
        """A leader's marker at ``offset``: the producer's new entry and the transaction it ends, to
        store with :meth:`apply` once written. InvalidProducerEpoch for an older producer epoch,
        TransactionCoordinatorFenced for an older coordinator epoch."""
        current = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        if epoch < current.epoch:
            raise InvalidProducerEpoch(producer_id, epoch, current.epoch, offset)
        if marker.coordinator_epoch < current.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                producer_id, marker.coordinator_epoch, current.coordinator_epoch, offset
            )
        return current.with_marker(epoch, marker, offset, timestamp)

    def apply(self, updates: Mapping[int, ProducerStateEntry]) -> None:
        """Store the entries of a checked append, once it is in the log."""
        self._producers.update(updates)
        for pid, entry in updates.items():
            self.transactions.track(pid, entry.current_txn_first_offset)

    def apply_replicated(
        self, header: RecordBatchHeader, marker: TxnMarker | None = None
    ) -> CompletedTxn | None:
        """A batch from the leader or from the log itself, at its own offsets: stored unchecked, with
        ``marker`` the one a control batch holds (a control batch without one changes nothing). The
        transaction a marker ends, if any.

        A broken rule is only logged: the leader accepted the batch, so the follower follows.
        """
        pid, epoch, offset = header.producer_id, header.producer_epoch, header.base_offset
        if pid < 0 or (header.is_control and marker is None):
            return None
        entry = self._producers.get(pid) or ProducerStateEntry(pid)
        if epoch < entry.epoch:
            log.warning(
                "producer %d: replicated batch at offset %d has epoch %d, older than its epoch %d",
                pid, offset, epoch, entry.epoch,
            )  # fmt: skip
        completed = None
        if header.is_control and marker is not None:
            if marker.coordinator_epoch < entry.coordinator_epoch:
                log.warning(
                    "producer %d: replicated marker at offset %d has coordinator epoch %d, older than %d",
                    pid, offset, marker.coordinator_epoch, entry.coordinator_epoch,
                )  # fmt: skip
            entry, completed = entry.with_marker(epoch, marker, offset, header.max_timestamp)
        else:
            batch = BatchMetadata(
                last_sequence(header), header.last_offset, header.last_offset_delta, header.max_timestamp
            )
            entry = entry.with_batch(epoch, batch)
            try:
                entry = entry.with_transactional_data(header.is_transactional, offset)
            except InvalidTxnState as exc:
                log.warning("replicated batch: %s", exc)
        self._producers[pid] = entry
        self.transactions.track(pid, entry.current_txn_first_offset)
        return completed

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for ``expiration_ms`` (by their last batch's timestamp); their ids."""
        gone = [pid for pid, entry in self._producers.items() if entry.expired(now_ms, expiration_ms)]
        for pid in gone:
            del self._producers[pid]
        return gone


# ---------------------------------------------------------------- snapshots


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot``: the state of the log before ``offset``."""
    return file_name(offset, SNAPSHOT_SUFFIX)


def encode_snapshot(entries: Sequence[ProducerStateEntry]) -> bytes:
    """Kafka's snapshot file, version 1, big-endian: only the last batch of each producer is kept."""
    out = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(entries))
    _SNAPSHOT_HEADER.pack_into(out, 0, SNAPSHOT_VERSION, 0, len(entries))
    position = _SNAPSHOT_HEADER.size
    for entry in entries:
        last = entry.batches[-1] if entry.batches else None
        _SNAPSHOT_ENTRY.pack_into(
            out,
            position,
            entry.producer_id,
            entry.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        position += _SNAPSHOT_ENTRY.size
    struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(memoryview(out)[_CRC_FROM:]))
    return bytes(out)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot file; CorruptSnapshot if its version, CRC or length is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshot(f"{len(data)} bytes cannot hold a snapshot header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(memoryview(data)[_CRC_FROM:])
    if computed != crc:
        raise CorruptSnapshot(f"CRC mismatch (stored {crc:#010x}, computed {computed:#010x})")
    expected = _SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * count
    if count < 0 or len(data) != expected:
        raise CorruptSnapshot(f"{len(data)} bytes for {count} producers (expected {expected})")
    entries = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size :]):
        pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first = fields
        batches = (BatchMetadata(last_seq, last_offset, offset_delta, timestamp),) if last_offset >= 0 else ()
        entries.append(ProducerStateEntry(pid, epoch, timestamp, batches, coordinator_epoch, txn_first))
    return entries
