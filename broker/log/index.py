"""A segment's sparse indexes, in Kafka's file formats: ``.index`` (offset -> byte position) and
``.timeindex`` (timestamp -> offset).

Both live in memory as arrays (a few MB per GB of log) and are appended to their files as entries
arrive, so a lookup is a bisect and never touches the disk. Offsets are stored relative to the
segment's base offset, as int32, big-endian, like Kafka's. Entries only ever grow at the end, and a
lookup from another thread bisects the arrays while the writer appends: each array grows by whole
items, and the second array of a pair grows first, so an index found by bisecting the first is
always valid in the second.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path

OFFSET_ENTRY = struct.Struct(">ii")
"""relative offset (the last offset of the batch at the position), byte position."""
TIME_ENTRY = struct.Struct(">qi")
"""timestamp (the largest seen so far in the segment), relative offset of the batch holding it."""
NO_TIMESTAMP = -1


class CorruptIndex(Exception):
    """An index file that cannot belong to its segment; the segment's indexes are rebuilt from its log."""


def _int32s(data: bytes) -> array[int]:
    values = array("i", data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


def _increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


class IndexFile:
    """The file under an index: entries appended in one write, truncated, or rewritten whole."""

    def __init__(self, path: Path, entry_size: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self._fd: int | None = None

    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def write_at(self, entry: int, data: bytes) -> None:
        os.pwrite(self.fd(), data, entry * self.entry_size)

    def truncate(self, entries: int) -> None:
        os.ftruncate(self.fd(), entries * self.entry_size)

    def rewrite(self, data: bytes) -> None:
        os.ftruncate(self.fd(), 0)
        if data:
            os.pwrite(self.fd(), data, 0)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Closes the descriptor only; the next write reopens it (sealed segments rarely write again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class OffsetIndex:
    """``.index``: an entry (last offset of a batch, its position) every ``index.interval.bytes``."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.file = IndexFile(path, OFFSET_ENTRY.size)
        self.base_offset = base_offset
        self._offsets = array("i")
        self._positions = array("i")
        self._written = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def load(self, segment_size: int) -> None:
        """Read the file; CorruptIndex unless its entries increase and point inside the segment."""
        try:
            data = self.file.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndex(f"{self.file.path} is missing") from None
        if len(data) % OFFSET_ENTRY.size:
            raise CorruptIndex(f"{self.file.path}: {len(data)} bytes is not a whole number of entries")
        values = _int32s(data)
        offsets, positions = values[0::2], values[1::2]
        if offsets and (offsets[0] < 0 or positions[0] < 0 or positions[-1] >= segment_size):
            raise CorruptIndex(f"{self.file.path}: entries outside the segment's {segment_size} bytes")
        if not (_increasing(offsets) and _increasing(positions)):
            raise CorruptIndex(f"{self.file.path}: entries do not increase")
        self._positions, self._offsets = positions, offsets
        self._written = len(offsets)

    def append(self, offset: int, position: int) -> None:
        """Add an entry in memory; ``write`` puts every new entry in the file at once."""
        self._positions.append(position)
        self._offsets.append(offset - self.base_offset)

    def write(self) -> None:
        if self._written < len(self._offsets):
            entries = zip(self._offsets[self._written :], self._positions[self._written :], strict=True)
            self.file.write_at(self._written, b"".join(OFFSET_ENTRY.pack(o, p) for o, p in entries))
            self._written = len(self._offsets)

    def rewrite(self) -> None:
        """Replace the file with the entries in memory (after a rebuild)."""
        entries = zip(self._offsets, self._positions, strict=True)
        self.file.rewrite(b"".join(OFFSET_ENTRY.pack(o, p) for o, p in entries))
        self._written = len(self._offsets)

    def lookup(self, offset: int) -> int:
        """The position of the last indexed batch whose last offset is <= ``offset`` (0 if none is)."""
        i = bisect_right(self._offsets, offset - self.base_offset)
        return self._positions[i - 1] if i else 0

    def last(self) -> tuple[int, int] | None:
        """The last entry as (absolute offset, position)."""
        if not self._offsets:
            return None
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries at or after ``position`` (the batches there are being removed)."""
        keep = bisect_left(self._positions, position)
        del self._offsets[keep:]
        del self._positions[keep:]
        if keep < self._written:
            self.file.truncate(keep)
            self._written = keep

    def clear(self) -> None:
        del self._offsets[:]
        del self._positions[:]


class TimeIndex:
    """``.timeindex``: an entry when the segment's largest timestamp has grown since the last one."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.file = IndexFile(path, TIME_ENTRY.size)
        self.base_offset = base_offset
        self._timestamps = array("q")
        self._offsets = array("i")
        self._written = 0

    def __len__(self) -> int:
        return len(self._timestamps)

    def load(self) -> None:
        """Read the file; CorruptIndex unless timestamps increase and offsets do not go back."""
        try:
            data = self.file.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndex(f"{self.file.path} is missing") from None
        if len(data) % TIME_ENTRY.size:
            raise CorruptIndex(f"{self.file.path}: {len(data)} bytes is not a whole number of entries")
        timestamps, offsets = array("q"), array("i")
        for timestamp, offset in TIME_ENTRY.iter_unpack(data):
            if offset < 0 or (offsets and (timestamp <= timestamps[-1] or offset < offsets[-1])):
                raise CorruptIndex(f"{self.file.path}: entries do not increase")
            timestamps.append(timestamp)
            offsets.append(offset)
        self._offsets, self._timestamps = offsets, timestamps
        self._written = len(offsets)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) in memory if ``timestamp`` is above the last entry's (Kafka's rule)."""
        if timestamp > (self._timestamps[-1] if self._timestamps else NO_TIMESTAMP):
            self._offsets.append(offset - self.base_offset)
            self._timestamps.append(timestamp)

    def write(self) -> None:
        if self._written < len(self._timestamps):
            entries = zip(self._timestamps[self._written :], self._offsets[self._written :], strict=True)
            self.file.write_at(self._written, b"".join(TIME_ENTRY.pack(t, o) for t, o in entries))
            self._written = len(self._timestamps)

    def rewrite(self) -> None:
        entries = zip(self._timestamps, self._offsets, strict=True)
        self.file.rewrite(b"".join(TIME_ENTRY.pack(t, o) for t, o in entries))
        self._written = len(self._timestamps)

    def lookup_below(self, timestamp: int) -> int | None:
        """The offset of the last entry whose timestamp is < ``timestamp``: every record up to it is older."""
        i = bisect_left(self._timestamps, timestamp)
        return self.base_offset + self._offsets[i - 1] if i else None

    def last(self) -> tuple[int, int] | None:
        """The last entry as (timestamp, absolute offset)."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for offsets >= ``offset``."""
        keep = bisect_left(self._offsets, offset - self.base_offset)
        del self._timestamps[keep:]
        del self._offsets[keep:]
        if keep < self._written:
            self.file.truncate(keep)
            self._written = keep

    def clear(self) -> None:
        del self._timestamps[:]
        del self._offsets[:]
