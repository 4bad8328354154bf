"""Swapping cleaned segments into a log so that a crash at any point leaves the old ones or the new.

Kafka's protocol, file by file. The cleaner writes a segment under ``<base>.log.cleaned`` (and its
``.index``, ``.timeindex``, ``.txnindex`` likewise), fsynced. :func:`begin_swap` renames them to ``.swap``,
the indexes first and the log last, so that a ``.log.swap`` means the new segment is whole. Then
:func:`finish_swap` deletes the replaced segments and renames the ``.swap`` files to the final names (the
first replaced segment has the same base offset: its files are replaced by the renames).

:func:`complete_swaps`, run when a log is opened, finishes what a crash interrupted: ``.cleaned`` files
(and the ``.swap`` files of a segment whose ``.log.cleaned`` was still there) are deleted, the swap had
not begun; a ``.log.swap`` replaces every segment whose base offset lies in the offsets it covers;
an index ``.swap`` left alone is renamed over its segment's index (the crash came after the log's
rename).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from broker.checkpoint import fsync_directory
from broker.log.index import IndexFile
from broker.log.segment import (
    HEADER_WALK_CHUNK,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    InvalidBytes,
    Segment,
    file_name,
    offset_from_file_name,
    walk,
)
from broker.log.txn_index import TXN_INDEX_SUFFIX

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "begin_swap", "complete_swaps", "finish_swap"]

log = logging.getLogger("broker.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def _final(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(CLEANED_SUFFIX).removesuffix(SWAP_SUFFIX))


def _rename_index(index_file: IndexFile, suffix: str) -> None:
    target = _final(index_file.path).with_name(_final(index_file.path).name + suffix)
    if index_file.path.exists():
        os.replace(index_file.path, target)
    elif not suffix:
        target.unlink(missing_ok=True)  # the replaced segment's file of that name must not stay
    index_file.path = target


def begin_swap(segment: Segment) -> None:
    """``.cleaned`` -> ``.swap``: from here on, a restart completes the swap."""
    for index_file in segment.index_files():
        _rename_index(index_file, SWAP_SUFFIX)
    swap = _final(segment.path).with_name(_final(segment.path).name + SWAP_SUFFIX)
    os.replace(segment.path, swap)
    segment.path = swap
    fsync_directory(segment.path.parent)


def finish_swap(segment: Segment, replaced: Sequence[Segment]) -> None:
    """Delete ``replaced`` (their descriptors closed, nothing written) and give ``segment``'s ``.swap``
    files their final names, the log's first: the order :func:`complete_swaps` expects."""
    for old in replaced:
        old.release()
        if old.base_offset != segment.base_offset:
            old.path.unlink(missing_ok=True)
            for index_file in old.index_files():
                index_file.path.unlink(missing_ok=True)
    final = _final(segment.path)
    os.replace(segment.path, final)
    segment.path = final
    for index_file in segment.index_files():
        _rename_index(index_file, "")
    fsync_directory(final.parent)


def _base_of(path: Path) -> int | None:
    return offset_from_file_name(_final(path))


def _next_offset(path: Path, base: int) -> int:
    """The offset after the last whole batch of a segment file (``base`` if it holds none)."""
    fd = os.open(path, os.O_RDONLY)
    next_offset = base
    try:
        for _, header, _ in walk(fd, 0, os.fstat(fd).st_size, whole=False, chunk=HEADER_WALK_CHUNK):
            next_offset = header.next_offset
    except InvalidBytes:
        pass  # the segment's own recovery cuts it there
    finally:
        os.close(fd)
    return next_offset


def complete_swaps(directory: Path) -> list[str]:
    """Finish or undo the swaps a crash interrupted in ``directory`` (see the module docstring);
    returns what was done, one line each, for the caller to log."""
    done = _undo_unbegun(directory)
    for swap in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = _base_of(swap)
        if base is not None:
            end = max(_next_offset(swap, base), base + 1)
            _delete_segments(directory, base, end)
            os.replace(swap, _final(swap))
            done.append(f"swapped in {_final(swap).name}, replacing the segments in offsets [{base}, {end})")
    for path in sorted(directory.glob(f"*{SWAP_SUFFIX}")):
        os.replace(path, _final(path))
        done.append(f"renamed {path.name}: its segment had been swapped in")
    if done:
        fsync_directory(directory)
    return done


def _undo_unbegun(directory: Path) -> list[str]:
    """Delete every ``.cleaned`` file, and the ``.swap`` files of a segment whose log was ``.cleaned``."""
    done = []
    not_begun = set()
    for path in sorted(directory.glob(f"*{CLEANED_SUFFIX}")):
        if path.name.endswith(LOG_SUFFIX + CLEANED_SUFFIX):
            not_begun.add(_base_of(path))
        path.unlink()
        done.append(f"deleted {path.name}: its swap had not begun")
    for path in sorted(directory.glob(f"*{SWAP_SUFFIX}")):
        if _base_of(path) in not_begun:
            path.unlink()
            done.append(f"deleted {path.name}: its swap had not begun")
    return done


def _delete_segments(directory: Path, start: int, end: int) -> None:
    """Delete the files of every segment whose base offset is in [``start``, ``end``)."""
    for path in directory.glob(f"*{LOG_SUFFIX}"):
        base = offset_from_file_name(path)
        if base is not None and start <= base < end:
            for suffix in _SEGMENT_SUFFIXES:
                (directory / file_name(base, suffix)).unlink(missing_ok=True)
