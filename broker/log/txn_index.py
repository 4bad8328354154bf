"""A segment's aborted transaction index, ``<base offset>.txnindex``, in Kafka's file format.

A read_committed consumer is sent the aborted records with the rest and drops them itself, told by
Fetch's ``aborted_transactions`` which producers' transactions from which offsets were aborted; this
index answers that without reading the log. One entry per transaction an ABORT marker in the segment
completed, 34 bytes big-endian: version (0), producer id, first offset, last offset (the marker's),
and the last stable offset just after the marker, which lets a search stop early: every aborted
transaction overlapping offsets below it is listed by then. Kafka creates the file with its first
entry, so segments without aborts (and logs older than transactions) have none.

Entries live in memory as a tuple replaced whole: readers on other threads take no lock.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from broker.checkpoint import fsync_directory
from broker.log.index import IndexFile

__all__ = [
    "TXN_INDEX_SUFFIX",
    "AbortedSearch",
    "AbortedTxn",
    "TransactionIndex",
    "collect_aborted",
    "search_entries",
]

log = logging.getLogger("broker.log")

TXN_INDEX_SUFFIX = ".txnindex"
TXN_ENTRY = struct.Struct(">hqqqq")
"""version, producer id, first offset, last offset, last stable offset: 34 bytes."""
TXN_INDEX_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: a producer's records from ``first_offset`` to its marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The ABORT marker's offset."""
    last_stable_offset: int
    """The partition's last stable offset once the marker was written."""


class TransactionIndex:
    """The ``.txnindex`` of one segment; only the log's writer changes it."""

    def __init__(self, path: Path) -> None:
        self.file = IndexFile(path, TXN_ENTRY.size)
        self.entries: tuple[AbortedTxn, ...] = ()
        """In marker order: appended as markers are, and cut only from the end."""
        self._dirty = False
        self._new_file = False

    def load(self) -> None:
        """Read the file if there is one. Only whole entries of version 0 are kept: a torn tail (a crash
        in the middle of an append) is cut from the file, and so is anything unreadable."""
        try:
            data = self.file.path.read_bytes()
        except FileNotFoundError:
            self.entries = ()
            return
        whole = len(data) - len(data) % TXN_ENTRY.size
        entries = []
        for version, producer_id, first, last, stable in TXN_ENTRY.iter_unpack(memoryview(data)[:whole]):
            if version != TXN_INDEX_VERSION:
                break
            entries.append(AbortedTxn(producer_id, first, last, stable))
        self.entries = tuple(entries)
        if len(entries) * TXN_ENTRY.size < len(data):
            log.warning(
                "%s: keeping the first %d entries of %d bytes (a torn or unreadable tail)",
                self.file.path, len(entries), len(data),
            )  # fmt: skip
            self.file.truncate(len(entries))

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end of the file (creating it with the first one); ``flush`` syncs it."""
        if not self.entries:
            self._new_file = True
        entry = TXN_ENTRY.pack(
            TXN_INDEX_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
        )
        self.file.write_at(len(self.entries), entry)
        self.entries = (*self.entries, txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (those batches are going away)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(self.entries):
            self.file.truncate(keep)
            self.entries = self.entries[:keep]
            self._dirty = True

    def reset(self) -> None:
        """No entries and no file (a segment created where an older one may have left one)."""
        self.file.close()
        self.file.path.unlink(missing_ok=True)
        self.entries = ()
        self._dirty = self._new_file = False

    def collect(self, start: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's search of one index (:func:`search_entries`)."""
        return search_entries(self.entries, start, upper_bound)

    def flush(self) -> None:
        """fsync what was written since the last flush (and the directory, for a new file)."""
        if not self._dirty:
            return
        os.fsync(self.file.fd())
        if self._new_file:
            fsync_directory(self.file.path.parent)
        self._dirty = self._new_file = False


def search_entries(
    entries: Iterable[AbortedTxn], start: int, upper_bound: int
) -> tuple[list[AbortedTxn], bool]:
    """Kafka's search of one index: the entries overlapping [``start``, ``upper_bound``), and whether
    the search is complete (an entry's last stable offset reached ``upper_bound``)."""
    found = []
    for txn in entries:
        if txn.last_offset >= start and txn.first_offset < upper_bound:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound:
            return found, True
    return found, False


class AbortedSearch(Protocol):
    """What :func:`collect_aborted` searches: a segment's transaction index, or its entries as planned."""

    def collect(self, start: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]: ...


def collect_aborted(indexes: Iterable[AbortedSearch], start: int, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [``start``, ``upper_bound``), searching ``indexes`` (those of
    the segment holding ``start`` and the following ones) until one search is complete."""
    found: list[AbortedTxn] = []
    for index in indexes:
        part, complete = index.collect(start, upper_bound)
        found += part
        if complete:
            break
    return found
