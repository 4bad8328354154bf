"""Transactions in one partition: which are open, which ended above the high watermark, and the last
stable offset they leave read_committed consumers (Kafka's ``ongoingTxns`` and ``unreplicatedTxns``).

A producer's first transactional batch opens its transaction at that batch's offset; a transaction
marker (a control batch written for the transaction coordinator) ends it. An ended transaction keeps
holding the last stable offset back until the high watermark passes its marker, so a consumer never
reads past a marker that could still be lost with a leader change.

Pure and single-threaded, like ``broker.log.producer_state``, whose table owns the tracker.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.control_records import ControlType, decode_marker
from protocol.errors import ProtocolError
from protocol.record_batch import RecordBatchHeader

__all__ = [
    "CompletedTxn",
    "InvalidTxnState",
    "TransactionCoordinatorFenced",
    "TransactionTracker",
    "TxnMarker",
    "marker_of",
]

log = logging.getLogger("broker.log")


class InvalidTxnState(Exception):
    """A producer's non-transactional batch while its transaction is open (INVALID_TXN_STATE)."""

    def __init__(self, producer_id: int, offset: int) -> None:
        super().__init__(
            f"producer {producer_id}: the batch at offset {offset} is not transactional, but its "
            "transaction is open"
        )
        self.producer_id = producer_id


class TransactionCoordinatorFenced(Exception):
    """A marker from a coordinator epoch older than the producer's last one
    (TRANSACTION_COORDINATOR_FENCED): a zombie coordinator wrote it."""

    def __init__(self, producer_id: int, coordinator_epoch: int, current: int, offset: int) -> None:
        super().__init__(
            f"producer {producer_id}: coordinator epoch {coordinator_epoch} of the marker at offset "
            f"{offset} is older than its current one {current}"
        )
        self.producer_id = producer_id
        self.coordinator_epoch = coordinator_epoch
        self.current = current


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """What a transaction marker says: commit or abort, and the coordinator epoch that wrote it."""

    commit: bool
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended (a marker for no open transaction ends none)."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The marker's offset."""
    aborted: bool


def marker_of(header: RecordBatchHeader, batch: bytes | bytearray | memoryview) -> TxnMarker | None:
    """The marker a control batch holds; None for an empty or unreadable one (logged): Kafka skips an
    empty one, whose transaction the cleaner removed."""
    if header.records_count == 0:
        return None
    try:
        control_type, coordinator_epoch = decode_marker(batch)
    except ProtocolError as exc:
        log.warning(
            "producer %d: control batch at offset %d is not a transaction marker: %s",
            header.producer_id, header.base_offset, exc,
        )  # fmt: skip
        return None
    return TxnMarker(control_type == ControlType.COMMIT, coordinator_epoch)


class TransactionTracker:
    """The open transactions (producer id -> first offset) and the ended ones above the high watermark."""

    __slots__ = ("_ongoing", "_unreplicated")

    def __init__(self, ongoing: Mapping[int, int] | None = None) -> None:
        self._ongoing = dict(ongoing or {})
        self._unreplicated: dict[int, int] = {}
        """First offset -> marker offset of ended transactions the high watermark has not passed."""

    def __bool__(self) -> bool:
        """Whether any transaction holds the last stable offset back (false in most logs)."""
        return bool(self._ongoing or self._unreplicated)

    def track(self, producer_id: int, first_offset: int) -> None:
        """A producer's entry changed: its open transaction starts at ``first_offset`` (-1: none)."""
        if first_offset >= 0:
            self._ongoing[producer_id] = first_offset
        else:
            self._ongoing.pop(producer_id, None)

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The last stable offset once ``txn`` is complete (Kafka's, for the aborted index): where the
        earliest open transaction of another producer starts, else just after the marker."""
        others = [first for pid, first in self._ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """``txn`` ended: it no longer counts as open, but holds back until its marker is replicated."""
        if self._ongoing.get(txn.producer_id) == txn.first_offset:
            del self._ongoing[txn.producer_id]
        self._unreplicated[txn.first_offset] = txn.last_offset

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of an open transaction, or of an ended one whose marker is at or above
        ``high_watermark``; the ended ones below it are forgotten, as Kafka forgets them once the
        high watermark passes."""
        passed = [first for first, marker in self._unreplicated.items() if marker < high_watermark]
        for first in passed:
            del self._unreplicated[first]
        return min((*self._ongoing.values(), *self._unreplicated), default=None)
