"""One log segment: ``<base offset>.log`` (record batches as stored) and its ``.index``, ``.timeindex``
and ``.txnindex`` (the transactions aborted in it, written by the log's producer state).

The writer appends with one ``pwrite`` and then publishes the new ``size``; readers ``pread`` only up
to the size they saw, so they never see half a batch. Index entries are added exactly as Kafka adds
them (per batch, once more than ``index.interval.bytes`` went by since the last one), whether the
batch arrives in an append or in a recovery scan, so a rebuilt index is the one that was lost.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from broker.log.index import NO_TIMESTAMP, CorruptIndex, IndexFile, OffsetIndex, TimeIndex
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from protocol.record_batch import (
    HEADER_SIZE,
    CorruptRecordBatch,
    RecordBatchHeader,
    crc_valid,
    decode_records,
    parse_header,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
MAX_RELATIVE_OFFSET = 2**31 - 1
"""Index entries hold offsets relative to the segment's base as int32."""
HEADER_WALK_CHUNK = 8192
"""Bytes read at a time when only batch headers are wanted (an index lookup lands within a few KB)."""
SCAN_CHUNK = 1 << 20
"""Bytes read at a time by a recovery scan, which checks every batch's CRC."""

_OFFSET_DIGITS = 20
_SPAN = struct.Struct(">qi")  # base_offset, batch_length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_MIN_BATCH_LENGTH = HEADER_SIZE - _SPAN.size

BatchInfo = tuple[int, int, int]
"""What a segment needs to know of each appended batch: (last offset, max timestamp, size)."""


def file_name(offset: int, suffix: str) -> str:
    """Kafka's name for a segment's files and for snapshots: the offset, zero-padded to 20 digits."""
    return f"{offset:0{_OFFSET_DIGITS}d}{suffix}"


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> tuple[Path, Path, Path, Path]:
    """The files of the segment at ``base_offset``: its log, offset index, time index and transaction
    index, each name followed by ``suffix`` (as ``Segment.create`` names them)."""

    def named(kind: str) -> Path:
        return directory / (file_name(base_offset, kind) + suffix)

    return named(LOG_SUFFIX), named(INDEX_SUFFIX), named(TIME_INDEX_SUFFIX), named(TXN_INDEX_SUFFIX)


def offset_from_file_name(path: Path) -> int | None:
    """The offset a file is named after (``<20 digits>.<suffix>``), None for any other name."""
    stem = path.name.removesuffix(path.suffix)
    return int(stem) if len(stem) == _OFFSET_DIGITS and stem.isdigit() else None


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class InvalidBytes(Exception):
    """The bytes at ``position`` of a segment are not the start of a whole, valid batch."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"byte {position}: {reason}")
        self.position = position
        self.reason = reason


def walk(
    fd: int, start: int, end: int, *, whole: bool, chunk: int
) -> Iterator[tuple[int, RecordBatchHeader, memoryview]]:
    """(position, header, bytes) of each batch from ``start`` (a batch boundary) up to ``end``.

    The bytes are the whole batch when ``whole`` (for a CRC check), else only its header, so a walk
    over headers reads a few KB however large the batches. InvalidBytes at the first byte that does
    not begin a v2 batch lying wholly before ``end``.
    """
    buf = memoryview(b"")
    buf_start = pos = start
    while pos < end:
        left = end - pos
        if left < HEADER_SIZE:
            raise InvalidBytes(pos, f"{left} bytes at the end are too few for a batch header")
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf, buf_start, rel = memoryview(os.pread(fd, min(chunk, left), pos)), pos, 0
            if len(buf) < HEADER_SIZE:
                raise InvalidBytes(pos, "the file ends before the batch header does")
        try:
            header = parse_header(buf[rel : rel + HEADER_SIZE])
        except CorruptRecordBatch as exc:
            raise InvalidBytes(pos, str(exc).removeprefix("batch at byte 0: ")) from None
        size = header.size
        if size > left:
            raise InvalidBytes(pos, f"a batch of {size} bytes runs past the end ({left} bytes left)")
        if whole and rel + size > len(buf):
            buf, buf_start, rel = memoryview(os.pread(fd, min(max(chunk, size), left), pos)), pos, 0
            if len(buf) < size:
                raise InvalidBytes(pos, "the file ends before the batch does")
        yield pos, header, buf[rel : rel + (size if whole else HEADER_SIZE)]
        pos += size


def whole_batches(data: bytes, upper_bound: int) -> int:
    """How many leading bytes of ``data`` are whole batches that end before offset ``upper_bound``."""
    pos, end = 0, len(data)
    while end - pos >= HEADER_SIZE:
        base_offset, batch_length = _SPAN.unpack_from(data, pos)
        if batch_length < _MIN_BATCH_LENGTH or pos + _SPAN.size + batch_length > end:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + _LAST_OFFSET_DELTA_AT)
        if base_offset + delta + 1 > upper_bound:
            break
        pos += _SPAN.size + batch_length
    return pos


def end_offset(data: bytes) -> int | None:
    """The offset after the last whole batch of ``data`` (None if it holds none): where a read ended."""
    pos, end, next_offset = 0, len(data), None
    while end - pos >= HEADER_SIZE:
        base_offset, batch_length = _SPAN.unpack_from(data, pos)
        if batch_length < _MIN_BATCH_LENGTH or pos + _SPAN.size + batch_length > end:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + _LAST_OFFSET_DELTA_AT)
        next_offset = base_offset + delta + 1
        pos += _SPAN.size + batch_length
    return next_offset


def _write_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class Segment:
    """A run of batches from ``base_offset`` on, in one file; only the log's writer changes it."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, fd: int, suffix: str = ""
    ) -> None:
        self.base_offset = base_offset
        self.path, index, time_index, txn_index = segment_paths(directory, base_offset, suffix)
        self.offset_index = OffsetIndex(index, base_offset)
        self.time_index = TimeIndex(time_index, base_offset)
        self.txn_index = TransactionIndex(txn_index)
        self._fd = fd
        self._interval = index_interval_bytes
        self.size = 0
        """Bytes of whole batches, published after each append: readers never read past it."""
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.created_ms = wall_clock_ms()
        self._first_batch_timestamp: int | None = NO_TIMESTAMP
        self._bytes_since_index_entry = 0

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_interval_bytes: int, suffix: str = ""
    ) -> Segment:
        """A new, empty segment with empty index files (replacing any files of that name); a
        ``suffix`` after every file name keeps it apart from the log's own (the cleaner's ``.cleaned``)."""
        path = directory / (file_name(base_offset, LOG_SUFFIX) + suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, index_interval_bytes, fd, suffix)
        segment.offset_index.file.rewrite(b"")
        segment.time_index.file.rewrite(b"")
        segment.txn_index.reset()
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval_bytes: int, suffix: str = "") -> Segment:
        """An existing segment, not yet trusted: ``load`` or ``recover`` it before use (``suffix``: as
        in ``create``)."""
        fd = os.open(directory / (file_name(base_offset, LOG_SUFFIX) + suffix), os.O_RDWR)
        segment = cls(directory, base_offset, index_interval_bytes, fd, suffix)
        segment.size = os.fstat(fd).st_size
        segment._first_batch_timestamp = None
        segment.txn_index.load()
        return segment

    # -- loading

    def load(self) -> None:
        """Trust the file: read both indexes and walk the headers after the last offset-index entry.

        CorruptIndex if an index does not fit the file, InvalidBytes if the tail is not whole batches;
        either way the caller recovers the segment instead.
        """
        self.offset_index.load(self.size)
        self.time_index.load()
        self._load_tail(verify=True)
        self.txn_index.truncate_to(self.next_offset)

    def _load_tail(self, *, verify: bool) -> None:
        """Derive ``next_offset`` and the largest timestamp from the indexes and the batches after them.

        Kafka adds a time-index entry with each offset-index entry, so the time index knows the
        largest timestamp up to the last offset-index entry; only the batches after it are read.
        """
        last = self.offset_index.last()
        start = last[1] if last is not None else 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last() or (NO_TIMESTAMP, -1)
        self.next_offset = self.base_offset
        expected = None
        for position, header, _ in walk(self._fd, start, self.size, whole=False, chunk=HEADER_WALK_CHUNK):
            if verify and last is not None and position == start and header.last_offset != last[0]:
                raise CorruptIndex(f"{self.offset_index.file.path}: entry {last} is not a batch's")
            if expected is not None and header.base_offset < expected:
                raise InvalidBytes(position, f"offset {header.base_offset} goes back (expected {expected})")
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
            expected = self.next_offset = header.next_offset
        if last is not None and expected is None:
            raise CorruptIndex(f"{self.offset_index.file.path}: entry {last} is past the log")
        time_last = self.time_index.last()
        if verify and time_last is not None and time_last[1] >= self.next_offset:
            raise CorruptIndex(f"{self.time_index.file.path}: entry {time_last} is past the log")
        self._bytes_since_index_entry = self.size - start

    def recover(self, min_offset: int, on_batch: Callable[[RecordBatchHeader], None]) -> InvalidBytes | None:
        """Check every batch (framing, magic, CRC-32C, increasing offsets from ``min_offset``) and rebuild
        both sparse indexes; at the first invalid byte, cut the file there and return what was wrong.
        Aborted-transaction entries past the last valid batch go (producer state rebuilds the others).
        """
        file_size = os.fstat(self._fd).st_size
        self.offset_index.clear()
        self.time_index.clear()
        expected = max(min_offset, self.base_offset)
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
        self._bytes_since_index_entry = 0
        self._first_batch_timestamp = NO_TIMESTAMP
        valid = 0
        problem = None
        try:
            for position, header, batch in walk(self._fd, 0, file_size, whole=True, chunk=SCAN_CHUNK):
                if not crc_valid(batch):
                    raise InvalidBytes(position, f"CRC mismatch (stored {header.crc:#010x})")
                if header.base_offset < expected:
                    raise InvalidBytes(position, f"offset {header.base_offset} is below {expected}")
                delta = header.last_offset_delta
                if delta < 0 or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise InvalidBytes(position, f"last offset delta {delta} is out of range")
                if valid == 0:
                    self._first_batch_timestamp = header.max_timestamp
                on_batch(header)
                self._track(header.last_offset, header.max_timestamp, position, header.size)
                expected = self.next_offset = header.next_offset
                valid = position + header.size
        except InvalidBytes as exc:
            problem = exc
            os.ftruncate(self._fd, valid)
        self.txn_index.truncate_to(self.next_offset)
        self.size = valid
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.rewrite()
        self.time_index.rewrite()
        return problem

    # -- appending

    def _track(self, last_offset: int, max_timestamp: int, position: int, size: int) -> None:
        """Index bookkeeping for one batch, the same on append and on rebuild (Kafka's rule)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        if self._bytes_since_index_entry > self._interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[BatchInfo]) -> None:
        """Write ``data`` (the batches, back to back) at the end in one write, then publish it."""
        start = position = self.size
        try:
            _write_all(self._fd, data, start)
            for last_offset, max_timestamp, size in batches:
                self._track(last_offset, max_timestamp, position, size)
                position += size
            self.offset_index.write()
            self.time_index.write()
        except BaseException:
            self._cut(start, self.next_offset)
            raise
        if start == 0:
            self._first_batch_timestamp = batches[0][1]
        self.next_offset = batches[-1][0] + 1
        self.size = position

    def rolling_timestamp(self) -> int:
        """The first batch's max timestamp, from which ``segment.ms`` counts (-1 if unknown)."""
        if self._first_batch_timestamp is None:
            first = next(walk(self._fd, 0, self.size, whole=False, chunk=HEADER_SIZE), None)
            self._first_batch_timestamp = first[1].max_timestamp if first else NO_TIMESTAMP
        return self._first_batch_timestamp

    def largest_timestamp(self) -> int:
        """What time-based retention compares: the largest record timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    # -- reading

    def producer_batches(self, offset: int) -> Iterator[tuple[RecordBatchHeader, bytes | None]]:
        """The batches holding offsets >= ``offset`` as producer state needs them: headers, read without
        their records, except a producer's control batches, which come whole (their marker counts)."""
        start = self.offset_index.lookup(offset)
        for position, header, _ in walk(self._fd, start, self.size, whole=False, chunk=HEADER_WALK_CHUNK):
            if header.last_offset >= offset:
                marker = header.is_control and header.producer_id >= 0
                yield header, os.pread(self._fd, header.size, position) if marker else None

    def find(self, offset: int, end: int) -> tuple[int, RecordBatchHeader] | None:
        """The first batch holding an offset >= ``offset`` within the first ``end`` bytes, if any."""
        start = self.offset_index.lookup(offset)
        for position, header, _ in walk(self._fd, start, end, whole=False, chunk=HEADER_WALK_CHUNK):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool) -> bytes | None:
        """Whole batches from the one holding ``offset``, ending before ``upper_bound``, within
        ``max_bytes`` (except a larger first batch when ``min_one_batch``); None if the segment holds
        nothing at or after ``offset``.
        """
        end = self.size
        found = self.find(offset, end)
        if found is None:
            return None
        position, header = found
        if header.next_offset > upper_bound:
            return b""
        if header.size > max_bytes:
            return os.pread(self._fd, header.size, position) if min_one_batch else b""
        data = os.pread(self._fd, min(max_bytes, end - position), position)
        whole = whole_batches(data, upper_bound)
        return data if whole == len(data) else data[:whole]

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` stamped >= ``timestamp``.

        The time index says from where all earlier records are older; the walk from there reads
        headers, and the records of only the batch that holds the answer (if uncompressed).
        """
        older_until = self.time_index.lookup_below(timestamp)
        start = self.offset_index.lookup(max(older_until if older_until is not None else -1, min_offset))
        for position, header, _ in walk(self._fd, start, self.size, whole=False, chunk=HEADER_WALK_CHUNK):
            if header.max_timestamp < timestamp or header.last_offset < min_offset:
                continue
            if header.compression or header.log_append_time:
                return max(header.base_offset, min_offset), header.max_timestamp
            for record in decode_records(os.pread(self._fd, header.size, position)):
                offset = header.base_offset + record.offset_delta
                record_timestamp = header.base_timestamp + record.timestamp_delta
                if offset >= min_offset and record_timestamp >= timestamp:
                    return offset, record_timestamp
        return None

    # -- truncating, flushing, closing

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (a batch holding it goes whole)."""
        found = self.find(offset, self.size)
        if found is not None:
            position, header = found
            self._cut(position, header.base_offset)

    def _cut(self, position: int, offset: int) -> None:
        """Drop the bytes from ``position`` (where the batch at ``offset`` starts) on, and their entries."""
        os.ftruncate(self._fd, position)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self.txn_index.truncate_to(offset)
        self.size = position
        if position == 0:
            self._first_batch_timestamp = NO_TIMESTAMP
            self.created_ms = wall_clock_ms()
        self._load_tail(verify=False)

    def seal(self) -> None:
        """The segment stops being the active one: final time-index entry (as Kafka), fsync, close indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.time_index.write()
        self.flush()
        self.close_index_files()

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.file.flush()
        self.time_index.file.flush()
        self.txn_index.flush()

    def close_index_files(self) -> None:
        self.offset_index.file.close()
        self.time_index.file.close()
        self.txn_index.file.close()

    def close(self) -> None:
        """Close every descriptor (readers racing with this notice through the log's change counter)."""
        if self._fd < 0:
            return
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.time_index.write()
        self.close_index_files()
        fd, self._fd = self._fd, -1
        os.close(fd)

    def index_files(self) -> tuple[IndexFile, ...]:
        return (self.offset_index.file, self.time_index.file, self.txn_index.file)

    def release(self) -> None:
        """Close every descriptor and write nothing: the segment was replaced, its names reused."""
        if self._fd >= 0:
            self.close_index_files()
            fd, self._fd = self._fd, -1
            os.close(fd)

    def delete(self) -> None:
        self.release()
        self.path.unlink(missing_ok=True)
        for index_file in self.index_files():
            index_file.path.unlink(missing_ok=True)
