"""The leader epoch cache: at which offset each leader epoch started, Kafka's ``leader-epoch-checkpoint``.

A follower asks the leader where its last epoch ended (OffsetForLeaderEpoch, KIP-101/279) and
truncates to that instead of to its high watermark, so an unclean history can never survive a
leader change. The rules are Kafka's LeaderEpochFileCache's; the pure functions below hold them,
and :class:`LeaderEpochCache` persists the result after every change. Entries are replaced whole
(a tuple), so threads that only read see one consistent list.

File: ``0\\n<count>\\n<epoch> <start_offset>\\n...``, written atomically.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from broker.checkpoint import write_atomically

log = logging.getLogger("broker.log")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED = -1
"""Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET: "no such epoch", in OffsetForLeaderEpoch too."""


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


Entries = tuple[EpochEntry, ...]


def assign(entries: Entries, epoch: int, start_offset: int) -> Entries:
    """``entries`` after leader ``epoch`` is seen starting at ``start_offset``.

    A negative epoch (a batch from before epochs existed) is ignored. The latest epoch again changes
    nothing, unless it now starts earlier (Kafka's rule). Anything at or after the new entry, in
    epoch or offset, is dropped first so both columns keep increasing.
    """
    if epoch < 0:
        return entries
    if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
        return entries
    kept = [e for e in entries if e.epoch < epoch and e.start_offset < start_offset]
    return (*kept, EpochEntry(epoch, start_offset))


def end_offset_for(entries: Entries, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
    """(epoch, end offset) answering OffsetForLeaderEpoch for ``requested_epoch``.

    The end offset is where the next higher epoch starts (the log end for the latest epoch); the
    epoch is the largest one known that is <= the requested one. (-1, -1) when nothing is known.
    """
    if requested_epoch == UNDEFINED or not entries:
        return UNDEFINED, UNDEFINED
    if entries[-1].epoch == requested_epoch:
        return requested_epoch, log_end_offset
    higher = bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
    if higher == len(entries):
        return UNDEFINED, UNDEFINED
    if higher == 0:
        return requested_epoch, entries[0].start_offset
    return entries[higher - 1].epoch, entries[higher].start_offset


def truncate_from_end(entries: Entries, end_offset: int) -> Entries:
    """Drop the epochs starting at or after ``end_offset`` (the log was truncated there)."""
    return entries[: bisect_left(entries, end_offset, key=lambda e: e.start_offset)]


def truncate_from_start(entries: Entries, start_offset: int) -> Entries:
    """Drop the epochs wholly before ``start_offset``; the one in force there now starts at it."""
    first_after = bisect_right(entries, start_offset, key=lambda e: e.start_offset)
    if first_after == 0:
        return entries
    in_force = entries[first_after - 1]
    return (EpochEntry(in_force.epoch, start_offset), *entries[first_after:])


def epoch_for_offset(entries: Entries, offset: int) -> int:
    """The epoch whose leader wrote ``offset``: the last one starting at or before it (-1 if none)."""
    i = bisect_right(entries, offset, key=lambda e: e.start_offset)
    return entries[i - 1].epoch if i else UNDEFINED


class CorruptEpochCheckpoint(ValueError):
    pass


def read_checkpoint(path: Path) -> Entries | None:
    """The entries in ``path``, None if there is no file; CorruptEpochCheckpoint if it is malformed."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise CorruptEpochCheckpoint(f"{path}: {exc}") from None
    try:
        if int(lines[0]) != VERSION:
            raise CorruptEpochCheckpoint(f"{path}: unknown version {lines[0]!r}")
        count = int(lines[1])
        rows = [line.split() for line in lines[2:] if line.strip()]
        if len(rows) != count:
            raise CorruptEpochCheckpoint(f"{path}: expected {count} entries, found {len(rows)}")
        entries = tuple(EpochEntry(int(epoch), int(start)) for epoch, start in rows)
    except (IndexError, ValueError) as exc:
        if isinstance(exc, CorruptEpochCheckpoint):
            raise
        raise CorruptEpochCheckpoint(f"{path}: {exc}") from None
    for before, after in pairwise(entries):
        if after.epoch <= before.epoch or after.start_offset <= before.start_offset:
            raise CorruptEpochCheckpoint(f"{path}: entries {before} and {after} do not increase")
    if entries and (entries[0].epoch < 0 or entries[0].start_offset < 0):
        raise CorruptEpochCheckpoint(f"{path}: negative entry {entries[0]}")
    return entries


def write_checkpoint(path: Path, entries: Entries) -> None:
    lines = [str(VERSION), str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
    write_atomically(path, "\n".join(lines) + "\n")


class LeaderEpochCache:
    """One partition's epochs, written to ``leader-epoch-checkpoint`` whenever they change.

    Only the log's writer (under the log's lock) changes it; readers take ``entries`` as a snapshot.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.trusted = True
        """False when the file was missing or corrupt: the log rebuilds the epochs from its batches."""
        try:
            loaded = read_checkpoint(path)
        except CorruptEpochCheckpoint as exc:
            log.warning("%s: starting from an empty leader epoch cache: %s", path.parent.name, exc)
            loaded = None
        if loaded is None:
            self.trusted = False
            loaded = ()
        self.entries: Entries = loaded

    def _set(self, entries: Entries) -> None:
        if entries != self.entries:
            write_checkpoint(self.path, entries)
            self.entries = entries

    def save(self) -> None:
        """Write the file even if nothing changed: an untrusted cache, once rebuilt, is trusted again.

        Not done on load, so that a crash during the rebuild leaves the file missing or corrupt, and
        the next start rebuilds again instead of trusting a half-built cache.
        """
        write_checkpoint(self.path, self.entries)

    @property
    def latest_epoch(self) -> int | None:
        entries = self.entries
        return entries[-1].epoch if entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        self._set(assign(self.entries, epoch, start_offset))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        return end_offset_for(self.entries, requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        return epoch_for_offset(self.entries, offset)

    def truncate_from_end(self, end_offset: int) -> None:
        self._set(truncate_from_end(self.entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> None:
        self._set(truncate_from_start(self.entries, start_offset))

    def clear(self) -> None:
        self._set(())
