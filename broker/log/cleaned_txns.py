"""Which transactional batches and markers one cleaning may drop (Kafka's CleanedTransactionMetadata).

The cleaner never cleans past the last stable offset, so every transaction it meets is decided: the
aborted ones are listed, ahead of time, by the aborted transaction indexes. Walking the log in offset
order, an aborted transaction's data batches are discarded whatever their keys; its ABORT marker is
kept (and indexed again in the cleaned segment) while a batch of it was still met in this pass, and a
COMMIT marker while a batch of its transaction was. A marker whose transaction has nothing left may go
once its delete horizon has passed, which the cleaner decides.

Pure and used by one cleaning thread: the walk state is carried from one segment group to the next.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from broker.log.transactions import marker_of
from broker.log.txn_index import AbortedTxn, TransactionIndex
from protocol.record_batch import RecordBatchHeader

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """The transactions a walk over the log is inside of, and the aborted ones still ahead of it."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._ahead: list[tuple[int, int, AbortedTxn]] = []
        """Aborted transactions not reached yet: a heap by first offset."""
        self._committed: set[int] = set()
        """Producers whose transaction (not aborted) had a batch met since its last marker."""
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        """Producer -> its aborted transaction being walked through, and whether a batch was met."""
        self.cleaned_index: TransactionIndex | None = None
        """Where the aborted transactions kept in the segment being written are indexed again."""
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._ahead, (txn.first_offset, txn.last_offset, txn))

    def _reach(self, offset: int) -> None:
        """Aborted transactions starting at or before ``offset`` are now being walked through."""
        while self._ahead and self._ahead[0][0] <= offset:
            txn = heapq.heappop(self._ahead)[2]
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: RecordBatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (its records all go)."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            self._aborted[header.producer_id] = (aborted[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: RecordBatchHeader, batch: bytes | bytearray | memoryview) -> bool:
        """A control batch: True if nothing of its transaction is left, so it may go (once its
        delete horizon passed). An empty one was emptied by an earlier cleaning and may go."""
        self._reach(header.last_offset)
        if header.records_count == 0:
            return True
        marker = marker_of(header, batch)
        if marker is None:
            return False
        producer_id = header.producer_id
        if marker.commit:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        aborted = self._aborted.pop(producer_id, None)
        if aborted is not None and aborted[1]:
            if self.cleaned_index is not None:
                self.cleaned_index.append(aborted[0])
            return False
        return True
